import type { ServedModelNames } from '../model-names.ts';
import { HttpError } from './errors.ts';

/**
 * The `model` of a field-API request (absent: the served model). Any name is taken unless the server was started
 * with --strict-model-name; then a name it does not answer to is OpenAI's 404 model_not_found.
 */
export function requireServedModel(names: ServedModelNames, requested: string | undefined): void {
  if (requested === undefined || names.accepts(requested)) return;
  throw new HttpError(404, `The model '${requested}' does not exist; ${names.describe()}`, { param: 'model', code: 'model_not_found' });
}
