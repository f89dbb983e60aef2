/**
 * `.terraformignore` globs, matched by running a small automaton over the text (Thompson's
 * construction) instead of a backtracking regular expression. A pattern whose automaton has m states,
 * against a text of n characters, costs at most (2n + 1) × m state visits whatever the pattern:
 * `**a**a**a**a**a**b` against a long name is as cheap as `*.tfvars`. (A JavaScript RegExp, and so
 * picomatch or micromatch, which compile globs to one, promise nothing of the kind: that is how such a
 * line took minutes.)
 *
 * The syntax, as Terraform reads it: `*` is any run of characters but `/`, `?` one character but `/`,
 * `**` any run of characters, `**` followed by a slash zero or more whole directories, `[…]` one
 * character of a set (`[!…]` or `[^…]` outside it; ranges `a-z`; a `]` first in the set is itself;
 * a set without its `]` is plain text), and `\` makes the next character plain. Characters are Unicode
 * code points, as Go's regexp reads them.
 */

/** A pattern that cannot be read (a backwards range such as `[z-a]`). */
export class GlobSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GlobSyntaxError';
  }
}

type CharTest =
  | { kind: 'literal'; codePoint: number }
  | { kind: 'any' }
  | { kind: 'not-slash' }
  /** `ranges` holds pairs: low, high, low, high… */
  | { kind: 'set'; negated: boolean; ranges: number[] };

/** A state of the automaton: consume one character, fork without consuming, or accept. */
type State = { kind: 'char'; test: CharTest; next: number } | { kind: 'split'; first: number; second: number } | { kind: 'accept' };

/** Where the automaton can be after some text: the states that wait for a character, and whether it may stop here. */
export interface Position {
  readonly waiting: readonly number[];
  readonly accepting: boolean;
}

/** Counts the states an automaton visits, to show that matching stays linear. */
export interface StepMeter {
  steps: number;
}

const SLASH = 0x2f;
const ANY: CharTest = { kind: 'any' };
const NOT_SLASH: CharTest = { kind: 'not-slash' };

function passes(test: CharTest, codePoint: number): boolean {
  switch (test.kind) {
    case 'literal':
      return codePoint === test.codePoint;
    case 'any':
      return true;
    case 'not-slash':
      return codePoint !== SLASH;
    case 'set': {
      let inside = false;
      for (let index = 0; index < test.ranges.length && !inside; index += 2) {
        inside = codePoint >= (test.ranges[index] as number) && codePoint <= (test.ranges[index + 1] as number);
      }
      return inside !== test.negated;
    }
  }
}

/** One piece of a pattern: a character, a run of characters, or whole directories (`**` and a slash). */
type Token = { kind: 'one'; test: CharTest } | { kind: 'run'; test: CharTest } | { kind: 'directories' };

const character = (codePoint: number): string => String.fromCodePoint(codePoint);

/**
 * The set starting at `chars[open]` (a `[`): its test and the index after its `]`, or undefined when it
 * has no `]` (then the `[` is plain text). A backwards range in a set that closes is an error.
 */
function readSet(chars: readonly number[], open: number): { test: CharTest; end: number } | undefined {
  let index = open + 1;
  const negated = chars[index] === 0x21 || chars[index] === 0x5e; // ! or ^
  if (negated) index += 1;
  const ranges: number[] = [];
  const first = index;
  let backwards: string | undefined;
  // One character of the set, `\` making the next one plain.
  const member = (): number => {
    if (chars[index] === 0x5c && index + 1 < chars.length) index += 1;
    index += 1;
    return chars[index - 1] as number;
  };
  while (index < chars.length) {
    if (chars[index] === 0x5d && index > first) {
      if (backwards) throw new GlobSyntaxError(`the range ${backwards} is backwards`);
      return { test: { kind: 'set', negated, ranges }, end: index + 1 };
    }
    const low = member();
    let high = low;
    if (chars[index] === 0x2d && index + 1 < chars.length && chars[index + 1] !== 0x5d) {
      index += 1;
      high = member();
      if (high < low) backwards ??= `${character(low)}-${character(high)}`;
    }
    ranges.push(low, high);
  }
  return undefined;
}

function tokenize(pattern: string): Token[] {
  const chars = Array.from(pattern, (char) => char.codePointAt(0) as number);
  const tokens: Token[] = [];
  let index = 0;
  const one = (test: CharTest, width: number): void => {
    tokens.push({ kind: 'one', test });
    index += width;
  };
  while (index < chars.length) {
    const char = chars[index] as number;
    const set = char === 0x5b ? readSet(chars, index) : undefined;
    if (char === 0x2a && chars[index + 1] === 0x2a) {
      const slashAfter = chars[index + 2] === SLASH;
      tokens.push(slashAfter ? { kind: 'directories' } : { kind: 'run', test: ANY });
      index += slashAfter ? 3 : 2;
    } else if (char === 0x2a) {
      tokens.push({ kind: 'run', test: NOT_SLASH });
      index += 1;
    } else if (char === 0x3f) {
      one(NOT_SLASH, 1);
    } else if (set) {
      one(set.test, set.end - index);
    } else if (char === 0x5c && index + 1 < chars.length) {
      one({ kind: 'literal', codePoint: chars[index + 1] as number }, 2);
    } else {
      one({ kind: 'literal', codePoint: char }, 1);
    }
  }
  return tokens;
}

/** Thompson's construction, built back to front so each piece knows the state after it. */
function automaton(tokens: readonly Token[]): { states: State[]; start: number } {
  const states: State[] = [{ kind: 'accept' }];
  const add = (state: State): number => states.push(state) - 1;
  let next = 0;
  for (let index = tokens.length - 1; index >= 0; index -= 1) {
    const token = tokens[index] as Token;
    if (token.kind === 'one') {
      next = add({ kind: 'char', test: token.test, next });
    } else if (token.kind === 'run') {
      // loop: either one more character (back to loop) or on to `next`.
      const loop = add({ kind: 'split', first: -1, second: next });
      const step = add({ kind: 'char', test: token.test, next: loop });
      states[loop] = { kind: 'split', first: step, second: next };
      next = loop;
    } else {
      // `(.*/)?`: skip it, or any characters then a slash.
      const slash = add({ kind: 'char', test: { kind: 'literal', codePoint: SLASH }, next });
      const loop = add({ kind: 'split', first: -1, second: slash });
      const step = add({ kind: 'char', test: ANY, next: loop });
      states[loop] = { kind: 'split', first: step, second: slash };
      next = add({ kind: 'split', first: loop, second: next });
    }
  }
  return { states, start: next };
}

/** A position as the automaton keeps it: interned, with the moves from it remembered. */
interface Node extends Position {
  /** Moves on code points below 128, and on the others. */
  readonly ascii: (Node | undefined)[];
  readonly other: Map<number, Node>;
}

/** How many distinct positions a pattern remembers moves between; past it, moves are still computed, only not kept. */
const REMEMBERED_POSITIONS = 4096;

/**
 * A compiled pattern. Matching can go in steps (a directory's path, then each name in it) from a
 * `Position`. Moves between positions are remembered as they are first made (a lazily built DFA, as
 * RE2 does), so a character usually costs one lookup; a move not yet made costs at most 2m visits.
 */
export class Glob {
  readonly source: string;
  private readonly states: State[];
  private readonly seen: Int32Array;
  private generation = 0;
  private readonly interned = new Map<string, Node>();
  /** Where matching starts: before any character. */
  readonly start: Position;

  constructor(pattern: string) {
    this.source = pattern;
    const { states, start } = automaton(tokenize(pattern));
    this.states = states;
    this.seen = new Int32Array(states.length);
    this.start = this.closure([start], undefined);
  }

  /** The states reachable from `from` without consuming anything, each visited once, as an interned node. */
  private closure(from: readonly number[], meter: StepMeter | undefined): Node {
    this.generation += 1;
    const waiting: number[] = [];
    let accepting = false;
    const stack = from.slice();
    while (stack.length > 0) {
      const index = stack.pop() as number;
      if (this.seen[index] === this.generation) continue;
      this.seen[index] = this.generation;
      if (meter) meter.steps += 1;
      const state = this.states[index] as State;
      if (state.kind === 'split') stack.push(state.second, state.first);
      else if (state.kind === 'char') waiting.push(index);
      else accepting = true;
    }
    if (waiting.length === 0 && !accepting) return DEAD_NODE;
    waiting.sort((a, b) => a - b);
    const key = `${accepting ? 'a' : 'w'}${waiting.join(',')}`;
    const known = this.interned.get(key);
    if (known) return known;
    const node: Node = { waiting, accepting, ascii: new Array<Node | undefined>(128).fill(undefined), other: new Map() };
    if (this.interned.size < REMEMBERED_POSITIONS) this.interned.set(key, node);
    return node;
  }

  private move(from: Node, codePoint: number, meter: StepMeter | undefined): Node {
    const remembered = codePoint < 128 ? from.ascii[codePoint] : from.other.get(codePoint);
    if (remembered) {
      if (meter) meter.steps += 1;
      return remembered;
    }
    const targets: number[] = [];
    for (const index of from.waiting) {
      const state = this.states[index] as Extract<State, { kind: 'char' }>;
      if (meter) meter.steps += 1;
      if (passes(state.test, codePoint)) targets.push(state.next);
    }
    const to = this.closure(targets, meter);
    if (this.interned.size < REMEMBERED_POSITIONS) {
      if (codePoint < 128) from.ascii[codePoint] = to;
      else from.other.set(codePoint, to);
    }
    return to;
  }

  /** The position after `text`, from `from` (a position of this pattern). */
  advance(from: Position, text: string, meter?: StepMeter): Position {
    let node = from as Node;
    for (let index = 0; index < text.length && node !== DEAD_NODE; index += 1) {
      const codePoint = text.codePointAt(index) as number;
      if (codePoint > 0xffff) index += 1;
      node = this.move(node, codePoint, meter);
    }
    return node;
  }

  /** Whether the whole of `text` matches. */
  matches(text: string, meter?: StepMeter): boolean {
    return this.advance(this.start, text, meter).accepting;
  }

  /** How many states the automaton has: the m of "at most (2n + 1) × m visits". */
  get size(): number {
    return this.states.length;
  }
}

const DEAD_NODE: Node = { waiting: [], accepting: false, ascii: [], other: new Map() };

/** No match is possible any more, whatever follows. */
export const DEAD: Position = DEAD_NODE;

export const isDead = (position: Position): boolean => position.waiting.length === 0 && !position.accepting;
