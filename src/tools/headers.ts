import { validateHeaderName, validateHeaderValue } from 'node:http';

/**
 * Why a request header cannot be sent as given, or null when it can: the name must be an HTTP token (RFC 9110, as
 * RFC 7230 defined it), the value must hold no line break, no other control character and nothing beyond U+00FF
 * (Node's own checks, the ones its HTTP client applies). The message names the header but never shows its value:
 * values carry secrets (`Authorization: Bearer …`), and a value with a line break would split the line it is
 * printed on. The name is shown JSON-quoted, so that a name with a line break cannot split a line either.
 */
export function headerProblem(name: string, value: string): string | null {
  try {
    validateHeaderName(name);
  } catch {
    return `${JSON.stringify(name)} is not a header name (an HTTP token: letters, digits and !#$%&'*+-.^_\`|~)`;
  }
  try {
    validateHeaderValue(name, value);
  } catch {
    const what = /[\r\n]/.test(value)
      ? 'a line break (CR or LF)'
      : /[\x00-\x08\x0a-\x1f\x7f]/.test(value) // eslint-disable-line no-control-regex -- control characters are the point
        ? 'a control character'
        : 'a character beyond U+00FF';
    return `the value of header ${JSON.stringify(name)} contains ${what}, which no HTTP header may hold (the value is not shown: it may be a secret)`;
  }
  return null;
}
