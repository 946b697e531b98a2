/**
 * GET /docs: the OpenAPI document rendered in the browser by the small script below. Self-contained on purpose:
 * no CDN (the server may run offline) and no static files from a package (the program is one bundled executable),
 * so nothing but this string is needed to serve it.
 */
export const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tool server API</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#f7f8fa}
main{max-width:1000px;margin:0 auto;padding:24px}
h1{margin:0 0 4px}h2{margin:32px 0 8px;text-transform:capitalize;border-bottom:1px solid #d9dde3}
details.op{background:#fff;border:1px solid #d9dde3;border-radius:6px;margin:8px 0}
details.op>summary{cursor:pointer;padding:8px 12px;display:flex;gap:12px;align-items:center}
.m{font:600 12px monospace;color:#fff;border-radius:4px;padding:3px 8px;min-width:44px;text-align:center}
.get{background:#2f7bd8}.post{background:#2e9a5e}
code,pre,.path{font-family:ui-monospace,monospace}.path{font-weight:600}
.body{padding:4px 16px 16px}pre{background:#f0f2f5;padding:8px;border-radius:4px;overflow:auto;font-size:13px}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eceef1;padding:4px 6px;text-align:left;vertical-align:top}
input,textarea{font:13px ui-monospace,monospace;width:100%;box-sizing:border-box}
button{margin-top:8px;padding:4px 14px}.muted{color:#5c6670}
</style>
</head>
<body>
<main><h1 id="title">Tool server API</h1><div id="info" class="muted"></div><div id="ops">Loading /openapi.json…</div>
<h2>Schemas</h2><div id="schemas"></div></main>
<script>
const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const child of children) node.append(child);
  return node;
};
const json = (value) => JSON.stringify(value, null, 2);
const refName = (schema) => schema && schema.$ref ? schema.$ref.split('/').pop() : null;
const schemaText = (schema) => refName(schema) || (schema && schema.type === 'array' && refName(schema.items) ? refName(schema.items) + '[]' : json(schema));
fetch('openapi.json').then((r) => r.json()).then((doc) => {
  document.getElementById('title').textContent = doc.info.title + ' ' + doc.info.version;
  document.getElementById('info').textContent = doc.info.description || '';
  const ops = document.getElementById('ops');
  ops.textContent = '';
  const byTag = new Map();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const tag = (op.tags || ['other'])[0];
      if (!byTag.has(tag)) byTag.set(tag, []);
      byTag.get(tag).push([path, method, op]);
    }
  }
  for (const [tag, list] of byTag) {
    ops.append(el('h2', {}, tag));
    for (const [path, method, op] of list) ops.append(operation(path, method, op));
  }
  const schemas = document.getElementById('schemas');
  for (const [name, schema] of Object.entries(doc.components.schemas)) {
    schemas.append(el('details', { id: 'schema-' + name, class: 'op' }, el('summary', {}, el('span', { class: 'path' }, name)), el('div', { class: 'body' }, el('pre', {}, json(schema)))));
  }
}).catch((error) => { document.getElementById('ops').textContent = 'Could not load openapi.json: ' + error; });

function operation(path, method, op) {
  const body = el('div', { class: 'body' });
  if (op.description) body.append(el('p', {}, op.description));
  const inputs = {};
  if (op.parameters && op.parameters.length) {
    const table = el('table', {}, el('tr', {}, el('th', {}, 'Parameter'), el('th', {}, 'In'), el('th', {}, 'Description'), el('th', {}, 'Value')));
    for (const p of op.parameters) {
      const input = el('input', { placeholder: p.schema && p.schema.default !== undefined ? String(p.schema.default) : '' });
      inputs[p.name] = [p, input];
      table.append(el('tr', {}, el('td', {}, el('code', {}, p.name + (p.required ? ' *' : ''))), el('td', {}, p.in), el('td', {}, (p.description || '') + (p.schema && p.schema.enum ? ' One of: ' + p.schema.enum.join(', ') : '')), el('td', {}, input)));
    }
    body.append(table);
  }
  let bodyInput = null;
  if (op.requestBody) {
    const schema = op.requestBody.content['application/json'].schema;
    body.append(el('p', {}, 'Request body (application/json): ', el('code', {}, schemaText(schema))));
    bodyInput = el('textarea', { rows: 4 }, '{}');
    body.append(bodyInput);
  }
  const responses = el('table', {}, el('tr', {}, el('th', {}, 'Status'), el('th', {}, 'Description'), el('th', {}, 'Schema')));
  for (const [status, response] of Object.entries(op.responses)) {
    const content = response.content ? Object.entries(response.content)[0] : null;
    responses.append(el('tr', {}, el('td', {}, status), el('td', {}, response.description), el('td', {}, content ? el('code', {}, content[0] + ' ' + schemaText(content[1].schema)) : '')));
  }
  body.append(el('p', {}, 'Responses'), responses);
  const output = el('pre', { hidden: '' });
  const button = el('button', {}, 'Send');
  button.onclick = async () => {
    let url = path;
    const query = new URLSearchParams();
    for (const [name, [p, input]] of Object.entries(inputs)) {
      if (input.value === '') continue;
      if (p.in === 'path') url = url.replace('{' + name + '}', encodeURIComponent(input.value));
      else query.set(name, input.value);
    }
    if (query.size) url += '?' + query;
    const init = { method: method.toUpperCase() };
    if (bodyInput) { init.body = bodyInput.value; init.headers = { 'content-type': 'application/json' }; }
    output.hidden = false;
    output.textContent = init.method + ' ' + url + ' …';
    try {
      const response = await fetch(url.replace(/^\\//, ''), init);
      const text = await response.text();
      let shown = text;
      try { shown = json(JSON.parse(text)); } catch {}
      output.textContent = init.method + ' ' + url + '\\n' + response.status + ' ' + response.headers.get('content-type') + '\\n\\n' + shown;
    } catch (error) { output.textContent = String(error); }
  };
  body.append(button, output);
  return el('details', { class: 'op' }, el('summary', {}, el('span', { class: 'm ' + method }, method.toUpperCase()), el('span', { class: 'path' }, path), el('span', { class: 'muted' }, op.summary || '')), body);
}
</script>
</body>
</html>
`;
