// Imported first by main.ts, before the modules whose loading is the process's first burst of
// allocation: keeps V8's young generation at its starting size (1 MiB semi-spaces) unless node
// flags size it. By default a burst of reconciles or module loading (short-lived API responses,
// parsed sources) grows it to 16 MiB semi-spaces, 32 MiB of resident memory for garbage that is
// seldom given back — more than the state of hundreds of sessions. Scavenges get more frequent
// instead, each no slower (they copy only what survives).
import { setFlagsFromString } from "node:v8";

const flags = `${process.execArgv.join(" ")} ${process.env.NODE_OPTIONS ?? ""}`;
if (!/semi[-_]space/.test(flags)) setFlagsFromString("--semi-space-growth-factor=1");
