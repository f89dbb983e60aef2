// A pipeline's reports of a local run are taken by the engine (takeReport there).
export { reportTransition, takeReport, type ExecutionReport } from '@runtasks/shared/engine';
