import type { FastifyInstance } from 'fastify';
import { DOCS_PAGE } from '../../src/tools/http/docs-page.ts';

/**
 * Just enough of a DOM to run the /docs page's script in Node (no browser here): elements with attributes and
 * children, text content, input values, click handlers; fetch goes to the app through inject.
 */
export class FakeElement {
  readonly tag: string;
  readonly attrs: Record<string, string> = {};
  children: (FakeElement | string)[] = [];
  hidden = false;
  onclick: (() => Promise<void> | void) | null = null;
  private valueOverride: string | undefined;

  constructor(tag: string) {
    this.tag = tag;
  }
  setAttribute(name: string, value: string): void {
    this.attrs[name] = String(value);
    if (name === 'hidden') this.hidden = true;
  }
  append(...children: (FakeElement | string)[]): void {
    this.children.push(...children);
  }
  get textContent(): string {
    return this.children.map((child) => (typeof child === 'string' ? child : child.textContent)).join('');
  }
  set textContent(text: string) {
    this.children = [String(text)];
  }
  get value(): string {
    return this.valueOverride ?? (this.tag === 'textarea' ? this.textContent : '');
  }
  set value(text: string) {
    this.valueOverride = text;
  }
  /** Every element below this one, depth first. */
  *descendants(): Generator<FakeElement> {
    for (const child of this.children) {
      if (typeof child === 'string') continue;
      yield child;
      yield* child.descendants();
    }
  }
}

/** Runs the page's script; resolves with the elements the page's HTML declares by id once it has rendered. */
export async function renderDocsPage(app: FastifyInstance): Promise<Record<string, FakeElement>> {
  const byId: Record<string, FakeElement> = {};
  for (const id of ['title', 'info', 'ops', 'schemas']) byId[id] = new FakeElement('div');
  const document = { createElement: (tag: string) => new FakeElement(tag), getElementById: (id: string) => byId[id] };
  const fetch = async (url: string, init: { method?: string; body?: string; headers?: Record<string, string> } = {}) => {
    const response = await app.inject({ method: (init.method ?? 'GET') as 'GET', url: `/${url}`, payload: init.body, headers: init.headers });
    return {
      status: response.statusCode,
      headers: { get: (name: string) => String(response.headers[name.toLowerCase()]) },
      text: async () => response.body,
      json: async () => response.json(),
    };
  };
  const script = DOCS_PAGE.split('<script>')[1].split('</script>')[0];
  new Function('document', 'fetch', 'URLSearchParams', script)(document, fetch, URLSearchParams);
  const deadline = Date.now() + 30_000;
  while (byId.schemas.children.length === 0 && !byId.ops.textContent.startsWith('Could not')) {
    if (Date.now() > deadline) throw new Error('the docs page did not render');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return byId;
}

/** The rendered operation for METHOD path: its parameter inputs by name, body textarea, send button and output. */
export function operationOf(ops: FakeElement, method: string, path: string) {
  for (const details of ops.descendants()) {
    if (details.tag !== 'details') continue;
    const summary = details.children[0] as FakeElement;
    const spans = summary.children as FakeElement[];
    if (spans[0].textContent !== method || spans[1].textContent !== path) continue;
    const all = [...details.descendants()];
    const inputs: Record<string, FakeElement> = {};
    for (const row of all.filter((element) => element.tag === 'tr')) {
      const cells = row.children as FakeElement[];
      const input = [...row.descendants()].find((element) => element.tag === 'input');
      if (input) inputs[cells[0].textContent.replace(' *', '')] = input;
    }
    return {
      inputs,
      body: all.find((element) => element.tag === 'textarea'),
      send: async () => all.find((element) => element.tag === 'button')!.onclick!(),
      output: all.find((element) => element.tag === 'pre' && element.attrs.hidden !== undefined)!,
    };
  }
  throw new Error(`no rendered operation ${method} ${path}`);
}

/** Every rendered operation as "METHOD path". */
export function renderedOperations(ops: FakeElement): string[] {
  return [...ops.descendants()]
    .filter((element) => element.tag === 'details')
    .map((details) => (details.children[0] as FakeElement).children as FakeElement[])
    .map((spans) => `${spans[0].textContent} ${spans[1].textContent}`);
}
