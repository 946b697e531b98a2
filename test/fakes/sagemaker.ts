// A fake of the SageMaker runtime on loopback: InvokeEndpoint (/endpoints/{name}/invocations) and
// InvokeEndpointWithResponseStream (/endpoints/{name}/invocations-response-stream, PayloadPart event-stream frames
// whose bytes are the container's SSE output, cut at arbitrary places). Requests must be SigV4-signed for service
// `sagemaker` (bedrock's fake checks the signature's shape). Endpoints: a chat container answering OpenAI chat
// (`chat-endpoint`), a TGI-style text container (`tgi-endpoint`) and an embedding container (`embed-endpoint`).

import { EventStreamCodec, type MessageHeaders } from '@smithy/eventstream-codec';
import { authorised, awsError } from './bedrock.ts';
import { fakeVector, VendorServer, type Reply, type Route } from './vendor-server.ts';

const codec = new EventStreamCodec(
  (bytes) => Buffer.from(bytes).toString('utf8'),
  (text) => new Uint8Array(Buffer.from(text, 'utf8')),
);
const str = (value: string) => ({ type: 'string' as const, value });

/** One PayloadPart frame carrying these bytes. */
export function payloadFrame(text: string): Uint8Array {
  const headers: MessageHeaders = { ':event-type': str('PayloadPart'), ':content-type': str('application/octet-stream'), ':message-type': str('event') };
  return codec.encode({ headers, body: new Uint8Array(Buffer.from(text)) });
}

/** A ModelStreamError exception frame. */
export function modelStreamErrorFrame(message: string): Uint8Array {
  const headers: MessageHeaders = { ':exception-type': str('ModelStreamError'), ':content-type': str('application/json'), ':message-type': str('exception') };
  return codec.encode({ headers, body: new Uint8Array(Buffer.from(JSON.stringify({ Message: message, ErrorCode: 'ModelStreamError' }))) });
}

/** The container's SSE text cut into parts of 7 bytes, as frames. */
export function sseFrames(events: unknown[], done = true): Uint8Array[] {
  const textOut = events.map((event) => `data: ${JSON.stringify(event)}\n\n`).join('') + (done ? 'data: [DONE]\n\n' : '');
  return (textOut.match(/[\s\S]{1,7}/g) ?? []).map(payloadFrame);
}

export const stream = (frames: Uint8Array[], options: { cutAfter?: number } = {}): Reply => ({ frames, contentType: 'application/vnd.amazon.eventstream', ...options });

export const SAGEMAKER_USAGE = { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 };

type Chat = { messages: { role: string; content: unknown }[] };
const lastText = (body: Chat) => {
  const content = body.messages.at(-1)?.content;
  return typeof content === 'string' ? content : '';
};

export function chatChunks(body: Chat): unknown[] {
  const pieces = `echo: ${lastText(body)}`.match(/.{1,4}/gs) ?? [];
  return [
    ...pieces.map((content, i) => ({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'tgi', choices: [{ index: 0, delta: { ...(i === 0 ? { role: 'assistant' } : {}), content }, finish_reason: null }] })),
    { id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'tgi', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: SAGEMAKER_USAGE },
  ];
}

export async function startSagemakerFake(): Promise<VendorServer> {
  const routes: Route[] = [
    {
      method: 'POST',
      path: /^\/endpoints\/([^/]+)\/invocations$/,
      handle(request, match) {
        const denied = authorised(request, 'sagemaker');
        if (denied) return denied;
        const endpoint = decodeURIComponent(match[1]);
        const body = request.json as Record<string, unknown>;
        if (endpoint === 'chat-endpoint') {
          return { json: { id: 'cmpl-1', object: 'chat.completion', created: 1, model: 'tgi', choices: [{ index: 0, message: { role: 'assistant', content: `echo: ${lastText(body as Chat)}` }, finish_reason: 'stop' }], usage: SAGEMAKER_USAGE } };
        }
        if (endpoint === 'tgi-endpoint') return { json: [{ generated_text: `generated for ${String(body.inputs ?? lastText(body as Chat))}` }] };
        if (endpoint === 'embed-endpoint') {
          // TEI answers the vectors bare: [[…]]
          return { json: [fakeVector(String(body.inputs), body.dimensions as number | undefined)] };
        }
        return awsError(400, 'ValidationError', `Endpoint ${endpoint} of account 123456789012 not found.`);
      },
    },
    {
      method: 'POST',
      path: /^\/endpoints\/([^/]+)\/invocations-response-stream$/,
      handle(request, match) {
        const denied = authorised(request, 'sagemaker');
        if (denied) return denied;
        if (decodeURIComponent(match[1]) !== 'chat-endpoint') return awsError(400, 'ValidationError', 'Endpoint not found.');
        return stream(sseFrames(chatChunks(request.json as Chat)));
      },
    },
  ];
  return VendorServer.start(routes);
}
