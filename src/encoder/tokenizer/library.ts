/**
 * The parts of @huggingface/tokenizers this layer uses. Its type declarations re-export through
 * extensionless paths that `moduleResolution: nodenext` does not follow, so the shapes are
 * declared here; the values are the library's own classes.
 */
import * as tokenizers from '@huggingface/tokenizers';

/**
 * A library model instance: callable (`_call` = encode, then fuse_unk when the model asks for it), with the
 * vocabulary it built (TokenizerModel's public fields).
 */
export type LibraryModel = ((tokens: string[]) => string[]) & { tokens_to_ids: Map<string, number>; vocab: string[] };

interface LibraryModelClass {
  new (config: object, extra?: unknown): LibraryModel;
}

interface LibraryExports {
  WordPiece: LibraryModelClass;
  BPE: LibraryModelClass;
  Unigram: LibraryModelClass;
  SplitPreTokenizer: new (config: object) => { pattern: RegExp | null };
  Tokenizer: new (tokenizerJson: object, tokenizerConfig: object) => {
    encode(text: string): { ids: number[]; tokens: string[] };
    decode(ids: number[], options?: { skip_special_tokens?: boolean }): string;
  };
}

export const library = tokenizers as unknown as LibraryExports;
