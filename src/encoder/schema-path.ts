/** `/encoder/lua_libs/1` (a JSON schema error's instancePath) as users write it: `encoder.lua_libs[1]`. */
export function keyPathOf(instancePath: string): string {
  return instancePath
    .split('/')
    .slice(1)
    .map((part, i) => (/^\d+$/.test(part) ? `[${part}]` : i === 0 ? part : `.${part}`))
    .join('');
}
