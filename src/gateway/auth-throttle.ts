import { isIPv6 } from 'node:net';

/** Client addresses the throttle remembers at most: about 1 MB of memory, whatever the attack. */
const MAX_CLIENTS = 10_000;

interface Failures {
  /** When the window of this client's failures began (ms). */
  since: number;
  count: number;
}

/**
 * Failed credentials per client, so that keys cannot be guessed at network speed: after `maxFailures` invalid tokens
 * within `windowSeconds` of the first, every credential from that client — the right one too, so a guess cannot be
 * confirmed — is refused until the window ends. A success does not wipe the count (a client holding one valid key could
 * otherwise reset it between guesses). Fixed windows, per instance, in memory; at most MAX_CLIENTS addresses are
 * remembered (windows that ended are dropped first, then the oldest), at an amortised constant cost per failure.
 */
export class AuthThrottle {
  readonly #maxFailures: number;
  readonly #windowMs: number;
  readonly #clients = new Map<string, Failures>();

  constructor(options: { maxFailures: number; windowSeconds: number }) {
    this.#maxFailures = options.maxFailures;
    this.#windowMs = options.windowSeconds * 1000;
  }

  /** Seconds the client must wait before its credentials are looked at again; 0 when it may try now. */
  retryAfter(address: string, now = Date.now()): number {
    // No failure remembered (the usual case): no address to normalise on every request.
    if (this.#clients.size === 0) return 0;
    const failures = this.#clients.get(clientOf(address));
    if (!failures || failures.count < this.#maxFailures) return 0;
    const left = failures.since + this.#windowMs - now;
    return left > 0 ? Math.ceil(left / 1000) : 0;
  }

  /** Counts one invalid credential of this client. */
  fail(address: string, now = Date.now()): void {
    const client = clientOf(address);
    const failures = this.#clients.get(client);
    if (failures && now < failures.since + this.#windowMs) {
      failures.count++;
      return;
    }
    this.#clients.delete(client); // a new window goes to the end of the (oldest first) map
    if (this.#clients.size >= MAX_CLIENTS) this.#evict(now);
    this.#clients.set(client, { since: now, count: 1 });
  }

  /** Clients remembered now (tests: the table stays bounded). */
  get size(): number {
    return this.#clients.size;
  }

  /** Makes room: windows that ended go, then the oldest, down to 90 % so that the next sweep is 1,000 failures away. */
  #evict(now: number): void {
    for (const [client, failures] of this.#clients) if (now >= failures.since + this.#windowMs) this.#clients.delete(client);
    // a map iterates in insertion order: oldest first
    for (const client of this.#clients.keys()) {
      if (this.#clients.size < MAX_CLIENTS * 0.9) break;
      this.#clients.delete(client);
    }
  }
}

/**
 * The client an address stands for: an IPv4 address (also when mapped into IPv6, `::ffff:1.2.3.4`), or the /64 network
 * of an IPv6 address, since one host commonly holds a whole /64 and could otherwise try from each of its addresses.
 */
export function clientOf(address: string): string {
  const bare = address.split('%')[0].toLowerCase();
  if (!isIPv6(bare)) return bare;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(bare);
  if (mapped) return mapped[1];
  const [head, tail = ''] = bare.split('::');
  const front = head ? head.split(':') : [];
  const back = bare.includes('::') && tail ? tail.split(':') : [];
  const groups = bare.includes('::') ? [...front, ...Array<string>(8 - front.length - back.length).fill('0'), ...back] : front;
  return `${groups
    .slice(0, 4)
    .map((group) => Number.parseInt(group, 16).toString(16))
    .join(':')}::/64`;
}
