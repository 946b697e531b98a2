// Runs the vendor fakes of the native providers in their own process (the synchronous Hub forms block the calling
// thread, so a fake in that thread could never answer). Prints one JSON line {vendor: base URL}; stops on SIGTERM.

import { startAnthropicFake } from './anthropic.ts';
import { startCohereFake } from './cohere.ts';
import { startGeminiFake } from './gemini.ts';
import { startMistralFake } from './mistral.ts';
import { startOllamaFake } from './ollama.ts';
import { startVoyageFake } from './voyage.ts';

const [anthropic, gemini, mistral, cohere, ollama, voyage] = await Promise.all([
  startAnthropicFake(),
  startGeminiFake(),
  startMistralFake(),
  startCohereFake(),
  startOllamaFake(),
  startVoyageFake(),
]);
process.stdout.write(
  `${JSON.stringify({ anthropic: anthropic.server.url, gemini: gemini.url, mistral: mistral.server.url, cohere: cohere.url, ollama: ollama.url, voyage: `${voyage.url}/v1` })}\n`,
);
process.once('SIGTERM', () => {
  void Promise.all([anthropic.close(), gemini.close(), mistral.close(), cohere.close(), ollama.close(), voyage.close()]).then(() => process.exit(0));
});
