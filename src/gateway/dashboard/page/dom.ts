/**
 * Building the page: elements are made with createElement and text goes in as text nodes, never as markup, so no
 * value from the API (names, metadata, error messages) can become HTML. eslint forbids innerHTML and its relatives in
 * this folder.
 */
export type Child = Node | string | number | null | undefined | false;
type Attributes = Record<string, string | number | boolean | null | undefined | EventListener>;

function fill(element: Element, attributes: Attributes, children: Child[]): void {
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (typeof value === 'function') element.addEventListener(name.slice(2).toLowerCase(), value);
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  element.append(...children.filter((child): child is Node | string | number => child !== null && child !== undefined && child !== false).map((child) => (typeof child === 'number' ? String(child) : child)));
}

/** An HTML element: `h('button', { type: 'button', onClick: … }, 'Save')`; attributes named on… are listeners. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attributes: Attributes = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  fill(element, attributes, children);
  return element;
}

/** An SVG element (charts): presentation attributes only, no style attributes (the page's CSP allows none). */
export function svg<K extends keyof SVGElementTagNameMap>(tag: K, attributes: Attributes = {}, ...children: Child[]): SVGElementTagNameMap[K] {
  const element = document.createElementNS('http://www.w3.org/2000/svg', tag);
  fill(element, attributes, children);
  return element;
}

/** A labelled form control: the label wraps it, so tests and screen readers find the control by its label. */
export function field(label: string, control: HTMLElement, hint?: string): HTMLLabelElement {
  return h('label', { class: 'field' }, h('span', { class: 'field-label' }, label), control, hint ? h('small', { class: 'hint' }, hint) : null);
}

/** The values of a form's named controls, trimmed. */
export function formValues(form: HTMLFormElement): Record<string, string> {
  const values: Record<string, string> = {};
  for (const [name, value] of new FormData(form)) if (typeof value === 'string') values[name] = value.trim();
  return values;
}

/**
 * A table named by its caption (read by screen readers, hidden on screen, where the page's heading says it already),
 * with column headers; a column without a visible header ("") is the row's actions. It sits in a box that scrolls
 * sideways on a narrow screen, so the page itself never does; the box takes keyboard focus so that it can be scrolled
 * without a mouse.
 */
export function dataTable(caption: string, headers: string[], body: HTMLTableSectionElement, className?: string): HTMLElement {
  return h(
    'div',
    { class: 'table-wrap', role: 'region', 'aria-label': caption, tabindex: 0 },
    h(
      'table',
      { class: className },
      h('caption', { class: 'visually-hidden' }, caption),
      h('thead', {}, h('tr', {}, ...headers.map((header) => h('th', { scope: 'col' }, header || h('span', { class: 'visually-hidden' }, 'Actions'))))),
      body,
    ),
  );
}

/** A row of cells. */
export const tableRow = (cells: Child[], className?: string): HTMLTableRowElement => h('tr', { class: className }, ...cells.map((cell) => h('td', {}, cell)));

/** A data table of one row of cells per entry; an empty list says so instead. */
export function table(caption: string, headers: string[], rows: Child[][], empty: string): HTMLElement {
  if (rows.length === 0) return h('p', { class: 'empty' }, empty);
  return dataTable(caption, headers, h('tbody', {}, ...rows.map((cells) => tableRow(cells))));
}
