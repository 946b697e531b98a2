/**
 * Host names and origins as the HTTP front ends judge them against DNS rebinding and foreign web pages (the model
 * server's src/serve/http/host-guard.ts, the tool server's src/tools/http/browser-guard.ts): which names are loopback,
 * the name in a Host header, an origin in one spelling.
 */

/** True for the names and literals of loopback addresses: localhost, 127.0.0.0/8, ::1 (with or without brackets), ::ffff:127.x. */
export function isLoopbackHost(host: string): boolean {
  const name = unbracket(host.toLowerCase());
  return name === 'localhost' || name === '::1' || isIpv4Loopback(name) || (name.startsWith('::ffff:') && isIpv4Loopback(name.slice(7)));
}

function isIpv4Loopback(name: string): boolean {
  const parts = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(name);
  return parts !== null && parts.slice(1).every((part) => Number(part) <= 255);
}

/** `[::1]` → `::1`; anything else as it is. */
export function unbracket(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/** The host name of a Host header value (`name`, `name:port`, `[v6]`, `[v6]:port`), lowercased, brackets removed; null when malformed. */
export function hostNameOf(header: string): string | null {
  const value = header.trim().toLowerCase();
  if (value.startsWith('[')) {
    const end = value.indexOf(']');
    if (end === -1 || !/^(:\d*)?$/.test(value.slice(end + 1))) return null;
    return value.slice(1, end);
  }
  const colon = value.indexOf(':');
  if (colon !== -1 && (value.indexOf(':', colon + 1) !== -1 || !/^\d*$/.test(value.slice(colon + 1)))) return null;
  const name = colon === -1 ? value : value.slice(0, colon);
  return name === '' ? null : name;
}

/** An origin as configured or sent, in one spelling: lowercased, without a trailing slash. */
export function normalizeOrigin(origin: string): string {
  const trimmed = origin.trim().toLowerCase();
  return trimmed.endsWith('/') ? trimmed.slice(0, -1) : trimmed;
}
