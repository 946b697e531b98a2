/**
 * Error text of transforms. The user script is loaded under the chunk name "=transform", so Lua
 * reports positions as "transform:12:"; they are rewritten as "transform line 12:" (the form the
 * docs promise). A message without a position gets a "transform: " prefix.
 */
const POSITION = /(?:\[string "transform"\]|\btransform):(\d+):\s*/g;

export function transformMessage(raw: string): string {
  const message = raw.replace(POSITION, 'transform line $1: ');
  return message.startsWith('transform') ? message : `transform: ${message}`;
}
