#!/usr/bin/env node
// Package bin: Node >= 22.18 strips TypeScript types natively, so the CLI runs from source.
import '../src/main.ts';
