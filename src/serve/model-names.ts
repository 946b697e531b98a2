import { ConfigError } from '../encoder/errors.ts';

/**
 * The names under which the served model answers on the field's APIs (OpenAI's /v1/models and the `model` of
 * embeddings, embed and rerank bodies). One executable serves one model, so by default any `model` a client sends is
 * taken as this one (what text-embeddings-inference does): clients such as LangChain send their own default name
 * (`text-embedding-ada-002`), and a server that refused it would fail them at their first call. `serve
 * --served-model-name a,b` renames the model (the first name is the one answered and listed, as vLLM and TEI do);
 * `--strict-model-name` accepts only those names (or the build's model id without them) and refuses any other.
 *
 * The predictor knows only its model id; names are the front ends' business.
 */
export interface ModelNameOptions {
  /** `--served-model-name`: the first is answered in responses and listed; all are accepted. Default: the model id. */
  aliases?: readonly string[];
  /** `--strict-model-name`: a name outside the accepted ones is refused (OpenAI's 404 model_not_found). */
  strict?: boolean;
}

export class ServedModelNames {
  /** The name answered in responses (`model`) and listed by /v1/models. */
  readonly served: string;
  /** Every name taken as this model; the first is `served`. */
  readonly names: readonly string[];
  /** Whether a name outside `names` is refused. */
  readonly strict: boolean;

  constructor(modelId: string, options: ModelNameOptions = {}) {
    const aliases = options.aliases ?? [];
    const problem = modelNamesProblem(aliases);
    if (problem) throw new ConfigError(`served model names: ${problem}`);
    this.names = aliases.length > 0 ? [...aliases] : [modelId];
    this.served = this.names[0];
    this.strict = options.strict ?? false;
  }

  /** Whether `name` is taken as the served model: any name unless strict. */
  accepts(name: string): boolean {
    return !this.strict || this.names.includes(name);
  }

  /** What a refusal says about the names this server answers to. */
  describe(): string {
    const [served, ...others] = this.names;
    return others.length === 0 ? `this server serves '${served}'` : `this server serves '${served}' (also called ${others.map((name) => `'${name}'`).join(', ')})`;
  }
}

/** What is wrong with a list of served model names (an empty name, a repeated one), or null. */
export function modelNamesProblem(names: readonly string[]): string | null {
  const empty = names.findIndex((name) => name.trim() === '');
  if (empty >= 0) return `name ${empty + 1} is empty`;
  const repeated = names.find((name, index) => names.indexOf(name) !== index);
  if (repeated !== undefined) return `'${repeated}' is given twice`;
  return null;
}
