// acme.size-policy binding phases (provider binding wire v1). As sf's Gate (`[gate] type =
// "oats-binding"`), the check answers `ready` unless the bound binding declares a change
// freeze ({"freeze": true}), when it answers `unavailable` with the problem `change-freeze`.
import { readFileSync } from 'node:fs';

const phase = process.argv[2];
const request = JSON.parse(readFileSync(0, 'utf8'));
const echo = {
  schemaVersion: request.schemaVersion,
  phase: request.phase,
  slot: request.slot,
  capability: request.capability,
};
const answer = (body) => process.stdout.write(`${JSON.stringify({ ...echo, ...body })}\n`);

switch (phase) {
  case 'normalize':
    answer({ ok: true, result: { requirements: [], candidates: [], model: {} } });
    break;
  case 'bind':
    answer({
      ok: true,
      result: {
        payloadContract: 'acme.size-policy/1',
        payloadVersion: 1,
        payload: { freeze: request.input?.choices?.freeze === true },
        credentialRefs: [],
        provenance: [],
      },
    });
    break;
  case 'check': {
    const frozen = request.input?.binding?.freeze === true;
    answer({
      ok: true,
      result: frozen
        ? { status: 'unavailable', problems: [{ code: 'change-freeze' }] }
        : { status: 'ready', problems: [] },
    });
    break;
  }
  default:
    process.stderr.write(`unknown phase ${phase}\n`);
    process.exit(2);
}
