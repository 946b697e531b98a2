/**
 * The program a worker thread runs: a file (from source, the pinned Node strips a .ts file's types) or, in the single
 * executable, the source text of a bundle carried as a SEA asset (`eval`).
 */
export interface ThreadScript {
  script: string | URL;
  eval?: boolean;
}
