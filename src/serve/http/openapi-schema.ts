/**
 * JSON Schema (as src/encoder/schemas.ts writes it) to the Schema Object dialect of OpenAPI 3.0, which is an
 * older, stricter subset: one `type` (null goes in `nullable`), no `const`, `example` instead of `examples`,
 * boolean `exclusiveMinimum`/`exclusiveMaximum`. A keyword outside that subset throws, so a schema change that
 * OpenAPI 3.0 cannot express fails the tests instead of producing a document that lies.
 */
export type OpenApiSchema = { [keyword: string]: unknown };

/** Keywords that mean the same in JSON Schema and in OpenAPI 3.0 and take no sub-schema. */
const SAME_KEYWORDS = new Set([
  'title',
  'description',
  'default',
  'format',
  'enum',
  'required',
  'minimum',
  'maximum',
  'multipleOf',
  'minLength',
  'maxLength',
  'pattern',
  'minItems',
  'maxItems',
  'uniqueItems',
  'minProperties',
  'maxProperties',
  'readOnly',
  'writeOnly',
  'deprecated',
  '$ref',
]);

/** Keywords whose value is one sub-schema, a map of them, or a list of them. */
const SCHEMA_KEYWORDS = new Set(['items', 'not']);
const SCHEMA_MAP_KEYWORDS = new Set(['properties']);
const SCHEMA_LIST_KEYWORDS = new Set(['allOf', 'anyOf', 'oneOf']);

/** Keywords of a schema's identity that have no place in an OpenAPI component. */
const DROPPED_KEYWORDS = new Set(['$schema', '$id', '$comment']);

export function toOpenApiSchema(schema: unknown, at = '#'): OpenApiSchema {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) {
    throw new Error(`${at}: a JSON schema must be an object for OpenAPI 3.0, got ${JSON.stringify(schema)}`);
  }
  const out: OpenApiSchema = {};
  for (const [keyword, value] of Object.entries(schema)) {
    const where = `${at}/${keyword}`;
    if (SAME_KEYWORDS.has(keyword)) out[keyword] = structuredClone(value);
    else if (DROPPED_KEYWORDS.has(keyword)) continue;
    else if (SCHEMA_KEYWORDS.has(keyword)) out[keyword] = toOpenApiSchema(value, where);
    else if (SCHEMA_MAP_KEYWORDS.has(keyword)) {
      out[keyword] = Object.fromEntries(
        Object.entries(value as Record<string, unknown>).map(([name, sub]) => [name, toOpenApiSchema(sub, `${where}/${name}`)]),
      );
    } else if (SCHEMA_LIST_KEYWORDS.has(keyword)) {
      out[keyword] = (value as unknown[]).map((sub, i) => toOpenApiSchema(sub, `${where}/${i}`));
    } else if (keyword === 'additionalProperties') {
      out[keyword] = typeof value === 'boolean' ? value : toOpenApiSchema(value, where);
    } else if (keyword === 'type') {
      Object.assign(out, openApiType(value, where));
    } else if (keyword === 'const') {
      out.enum = [structuredClone(value)];
    } else if (keyword === 'examples') {
      if (Array.isArray(value) && value.length > 0) out.example = structuredClone(value[0]);
    } else if (keyword === 'exclusiveMinimum' || keyword === 'exclusiveMaximum') {
      if (typeof value !== 'number') throw new Error(`${where}: expected a number (JSON Schema 2019+), got ${JSON.stringify(value)}`);
      out[keyword === 'exclusiveMinimum' ? 'minimum' : 'maximum'] = value;
      out[keyword] = true;
    } else {
      throw new Error(`${where}: JSON schema keyword "${keyword}" has no OpenAPI 3.0 equivalent here`);
    }
  }
  return out;
}

/** `type: ['string', 'null']` becomes `type: 'string', nullable: true`; OpenAPI 3.0 has no `null` type. */
function openApiType(value: unknown, where: string): OpenApiSchema {
  const types = Array.isArray(value) ? value : [value];
  const nullable = types.includes('null');
  const rest = types.filter((type) => type !== 'null');
  if (rest.length !== 1 || typeof rest[0] !== 'string') {
    throw new Error(`${where}: OpenAPI 3.0 takes exactly one type besides null, got ${JSON.stringify(value)}`);
  }
  return nullable ? { type: rest[0], nullable: true } : { type: rest[0] };
}
