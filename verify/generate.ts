// `npm run verify:constants`: writes verify/constants.pml from the code (verify/constants.ts).
import { writeFileSync } from 'node:fs';
import { renderConstants } from './constants.ts';

const path = new URL('./constants.pml', import.meta.url);
writeFileSync(path, renderConstants());
process.stdout.write(`wrote ${path.pathname}\n`);
