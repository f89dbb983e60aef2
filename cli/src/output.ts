import { FAILED_RESULT, isFinalResult, type ResultView, type RunState } from './verdict.ts';

/**
 * Progress while a command waits: on a terminal a spinner and the stage's results redrawn in place
 * under the lines printed so far; in CI (CI set, no TTY, TERM=dumb) plain lines only. With `--output
 * json` the same plain lines go to stderr, so stdout carries nothing but the final JSON document.
 */
export interface Reporter {
  /** A line of its own (run created, a note). */
  line(text: string): void;
  /** A fresh look at the run: prints what changed since the last one. */
  update(state: RunState, shown: readonly string[]): void;
  /** Before the final output: stop redrawing. */
  stop(): void;
  /** How long nothing was printed: in CI, a long silence gets a "still waiting" line (a terminal has its spinner: 0). */
  quietMs(): number;
}

export interface Terminal {
  write(text: string): void;
  isTTY: boolean;
}

const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

export function isLiveTerminal(stream: { isTTY?: boolean }, env: Record<string, string | undefined>): boolean {
  const ci = env['CI'] !== undefined && env['CI'] !== '' && !['0', 'false'].includes(env['CI'].toLowerCase());
  return stream.isTTY === true && !ci && env['TERM'] !== 'dumb';
}

/** One line for a result that has ended. */
export function resultLine(result: ResultView): string {
  const failed = FAILED_RESULT.has(result.status);
  const note = !failed
    ? ''
    : result.enforcement !== 'mandatory'
      ? ' (advisory: warns only)'
      : result.stage === 'post_apply'
        ? ' (post_apply: warns only)'
        : '';
  const message = result.message ? ` - ${result.message.replace(/\s+/g, ' ').trim()}` : '';
  const url = result.url ? ` ${result.url}` : '';
  return `  ${result.stage} ${result.task} (${result.enforcement}): ${result.status}${note}${message}${url}`;
}

/** Plain lines: the run's status changes and each result as it ends. */
export function plainReporter(out: Terminal, now: () => number = Date.now): Reporter {
  let lastStatus = '';
  let lastWrite = now();
  const printed = new Set<string>();
  const write = (text: string): void => {
    lastWrite = now();
    out.write(text);
  };
  return {
    line: (text) => write(`${text}\n`),
    update(state, shown) {
      if (state.status !== lastStatus) {
        lastStatus = state.status;
        write(`run ${state.id}: ${state.status}\n`);
      }
      for (const stage of state.stages) {
        if (!shown.includes(stage.stage)) continue;
        for (const result of stage.results) {
          if (!isFinalResult(result.status) || printed.has(result.id)) continue;
          printed.add(result.id);
          write(`${resultLine(result)}\n`);
        }
      }
    },
    stop: () => undefined,
    quietMs: () => now() - lastWrite,
  };
}

/** The plain lines, plus a spinner and the pending results redrawn below them on a terminal. */
export function liveReporter(out: Terminal, intervalMs = 100): Reporter {
  const plain = plainReporter({ write: (text) => print(text), isTTY: true });
  let footer: string[] = [];
  let drawn = 0;
  let tick = 0;
  let state: RunState | undefined;
  let shownStages: readonly string[] = [];
  const since = Date.now();
  const clear = (): void => {
    if (drawn > 0) out.write(`\x1b[${drawn}F\x1b[0J`);
    drawn = 0;
  };
  const draw = (): void => {
    if (footer.length > 0) out.write(`${footer.join('\n')}\n`);
    drawn = footer.length;
  };
  function print(text: string): void {
    clear();
    out.write(text);
    draw();
  }
  const render = (): void => {
    if (!state) return;
    const spinner = SPINNER[tick % SPINNER.length] ?? '';
    const pending = state.stages
      .filter((stage) => shownStages.includes(stage.stage))
      .flatMap((stage) => stage.results.filter((result) => !isFinalResult(result.status)));
    const seconds = ((Date.now() - since) / 1000).toFixed(0);
    footer = [
      `${spinner} run ${state.id}: ${state.status} (${seconds}s)`,
      ...pending.map((result) => `    ${result.stage} ${result.task} (${result.enforcement}): ${result.status}`),
    ];
    clear();
    draw();
  };
  const timer = setInterval(() => {
    tick += 1;
    render();
  }, intervalMs);
  timer.unref();
  return {
    line: (text) => print(`${text}\n`),
    update(next, shown) {
      state = next;
      shownStages = shown;
      plain.update(next, shown);
      render();
    },
    stop() {
      clearInterval(timer);
      footer = [];
      clear();
    },
    quietMs: () => 0,
  };
}
