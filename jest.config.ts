import type { Config } from 'jest';

// Node 24 loads this file through type stripping, so it must stay erasable-only TypeScript.
const swc: [string, Record<string, unknown>] = [
  '@swc/jest',
  { jsc: { target: 'es2024', parser: { syntax: 'typescript' } }, module: { type: 'es6' } },
];

const config: Config = {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: { '^.+\\.ts$': swc },
  moduleNameMapper: {
    '^@runtasks/shared$': '<rootDir>/shared/src/index.ts',
    '^@runtasks/shared/engine$': '<rootDir>/shared/src/engine/index.ts',
  },
  testMatch: [
    '<rootDir>/shared/**/*.test.ts',
    '<rootDir>/services/*/src/**/*.test.ts',
    '<rootDir>/services/*/test/**/*.test.ts',
    '<rootDir>/test/**/*.test.ts',
    '<rootDir>/examples/**/*.test.ts',
    '<rootDir>/cli/test/**/*.test.ts',
  ],
  globalSetup: '<rootDir>/test/global-setup.ts',
  testTimeout: 30_000,
  maxWorkers: 2,
};

export default config;
