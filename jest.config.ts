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
  // The same map as shared/package.json's `exports`: Jest resolves the workspace link by these paths.
  moduleNameMapper: {
    '^@runtasks/shared/(config|errors|logger)$': '<rootDir>/shared/src/$1.ts',
    '^@runtasks/shared/([a-z-]+)$': '<rootDir>/shared/src/$1/index.ts',
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
