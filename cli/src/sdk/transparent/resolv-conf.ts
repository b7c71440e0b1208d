// The pod's /etc/resolv.conf, read (nameservers, search domains, options), and the
// namespace's own, written: the same search domains and options, with the nameserver
// being the helper's resolver (namespace-dns.ts), which asks the pod's nameservers.

export interface ResolvConf {
  nameservers: string[];
  search: string[];
  options: string[];
}

export function parseResolvConf(text: string): ResolvConf {
  const conf: ResolvConf = { nameservers: [], search: [], options: [] };
  for (const raw of text.split("\n")) {
    const line = raw.replace(/[#;].*$/, "").trim();
    if (!line) continue;
    const [key, ...values] = line.split(/\s+/);
    if (key === "nameserver" && values[0]) conf.nameservers.push(values[0]);
    // The last search/domain line wins, as in glibc.
    else if (key === "search") conf.search = values;
    else if (key === "domain" && values[0]) conf.search = [values[0]];
    else if (key === "options") conf.options.push(...values);
  }
  return conf;
}

export function namespaceResolvConf(pod: ResolvConf, resolver = "127.0.0.1"): string {
  const lines = [
    "# Written by switchyard exec: the Default cluster's DNS, answered through the session.",
    `nameserver ${resolver}`,
  ];
  if (pod.search.length) lines.push(`search ${pod.search.join(" ")}`);
  if (pod.options.length) lines.push(`options ${pod.options.join(" ")}`);
  return `${lines.join("\n")}\n`;
}
