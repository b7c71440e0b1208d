// The JavaScript heap in use after a full garbage collection of another Node process the bench
// started (a control plane of the embedded stack), read through the process's own inspector:
// SIGUSR1 opens it on 127.0.0.1:9229 (Node's default, loopback only), one CDP session asks for
// `HeapProfiler.collectGarbage` then `Runtime.getHeapUsage`, and the inspector is closed again
// so the next process can open its own. RSS deltas move with what the allocator keeps and
// gives back; the heap after a GC is what the objects hold, as the router bench measures it
// in-process. Only for processes of the bench itself: it is a debugging hook.
import WebSocket from "ws";

const INSPECTOR = "http://127.0.0.1:9229";

async function debuggerUrl(deadline: number): Promise<string> {
  for (;;) {
    try {
      const list = (await (await fetch(`${INSPECTOR}/json/list`)).json()) as Array<{
        webSocketDebuggerUrl?: string;
      }>;
      const url = list[0]?.webSocketDebuggerUrl;
      if (url) return url;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) throw new Error(`no inspector on ${INSPECTOR} after SIGUSR1`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Bytes of heap in use in process `pid` right after a full GC. */
export async function heapAfterGc(pid: number): Promise<number> {
  process.kill(pid, "SIGUSR1");
  const ws = new WebSocket(await debuggerUrl(Date.now() + 10_000));
  await new Promise<void>((resolve, reject) => ws.once("open", resolve).once("error", reject));
  let next = 0;
  const call = (method: string, params: object = {}) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const id = ++next;
      const onMessage = (data: WebSocket.RawData) => {
        const m = JSON.parse(data.toString()) as {
          id?: number;
          result?: Record<string, unknown>;
          error?: unknown;
        };
        if (m.id !== id) return;
        ws.off("message", onMessage);
        if (m.error) reject(new Error(`${method}: ${JSON.stringify(m.error)}`));
        else resolve(m.result ?? {});
      };
      ws.on("message", onMessage);
      ws.send(JSON.stringify({ id, method, params }));
    });
  try {
    await call("HeapProfiler.collectGarbage");
    const usage = await call("Runtime.getHeapUsage");
    // Closed once this session is gone (inspector.close waits for its connections).
    await call("Runtime.evaluate", {
      expression: `setTimeout(() => process.getBuiltinModule("node:inspector").close(), 50), 0`,
    });
    return Number(usage.usedSize);
  } finally {
    ws.close();
    await inspectorClosed(Date.now() + 10_000);
  }
}

/** Resolves once nothing answers on the inspector's port: the next SIGUSR1 opens a fresh one. */
async function inspectorClosed(deadline: number): Promise<void> {
  for (;;) {
    try {
      await fetch(`${INSPECTOR}/json/list`);
    } catch {
      return;
    }
    if (Date.now() > deadline) throw new Error(`the inspector on ${INSPECTOR} did not close`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
