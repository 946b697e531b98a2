// Runs the fake OpenAI-compatible server in its own process (for the synchronous forms, which block the calling
// thread) and prints its base address. Scripts and recorded requests are reachable over /__fake/ routes.
// --no-record: keeps no requests (for load).

import { FakeOpenAIServer } from './openai-compatible.ts';

const fake = await FakeOpenAIServer.start({ record: !process.argv.includes('--no-record') });
fake.enableControlRoutes();
process.stdout.write(`${fake.baseURL}\n`);
process.on('SIGTERM', () => void fake.close().then(() => process.exit(0)));
