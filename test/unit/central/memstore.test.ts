import { MemoryStore } from '../../../src/central/memstore.ts';
import { runStoreConformance } from './store-conformance.ts';

runStoreConformance('mem', () => ({ store: new MemoryStore() }));
