/**
 * Safe arithmetic for the `calculator` builtin: a recursive-descent parser over numbers, + - * / %
 * ^ (right-associative power), parentheses, unary signs, a few functions and constants. No eval.
 */
const FUNCTIONS: Record<string, { arity: [number, number]; fn: (...a: number[]) => number }> = {
  sqrt: { arity: [1, 1], fn: Math.sqrt },
  abs: { arity: [1, 1], fn: Math.abs },
  round: { arity: [1, 1], fn: Math.round },
  floor: { arity: [1, 1], fn: Math.floor },
  ceil: { arity: [1, 1], fn: Math.ceil },
  ln: { arity: [1, 1], fn: Math.log },
  log10: { arity: [1, 1], fn: Math.log10 },
  sin: { arity: [1, 1], fn: Math.sin },
  cos: { arity: [1, 1], fn: Math.cos },
  tan: { arity: [1, 1], fn: Math.tan },
  min: { arity: [1, 32], fn: Math.min },
  max: { arity: [1, 32], fn: Math.max },
  pow: { arity: [2, 2], fn: Math.pow },
};
const CONSTANTS: Record<string, number> = { pi: Math.PI, e: Math.E };

export class CalculatorError extends Error {}

type Token = { kind: 'num'; value: number } | { kind: 'id'; value: string } | { kind: 'op'; value: string };

function tokenize(src: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    const num = /^(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?/.exec(src.slice(i));
    if (num) {
      tokens.push({ kind: 'num', value: Number(num[0]) });
      i += num[0].length;
      continue;
    }
    const id = /^[A-Za-z_][A-Za-z0-9_]*/.exec(src.slice(i));
    if (id) {
      tokens.push({ kind: 'id', value: id[0].toLowerCase() });
      i += id[0].length;
      continue;
    }
    if (src.startsWith('**', i)) {
      tokens.push({ kind: 'op', value: '^' });
      i += 2;
      continue;
    }
    if ('+-*/%^(),'.includes(c)) {
      tokens.push({ kind: 'op', value: c });
      i++;
      continue;
    }
    throw new CalculatorError(`unexpected character '${c}' at position ${i + 1}`);
  }
  return tokens;
}

export function evaluate(expression: string): number {
  if (expression.length > 1000) throw new CalculatorError('expression too long (max 1000 characters)');
  const tokens = tokenize(expression);
  let pos = 0;
  let depth = 0;
  const peek = () => tokens[pos];
  const isOp = (v: string) => peek()?.kind === 'op' && peek()?.value === v;
  const expect = (v: string) => {
    if (!isOp(v)) throw new CalculatorError(`expected '${v}'`);
    pos++;
  };

  const expr = (): number => {
    let v = term();
    while (isOp('+') || isOp('-')) {
      const op = tokens[pos++].value;
      const r = term();
      v = op === '+' ? v + r : v - r;
    }
    return v;
  };
  const term = (): number => {
    let v = unary();
    while (isOp('*') || isOp('/') || isOp('%')) {
      const op = tokens[pos++].value;
      const r = unary();
      if ((op === '/' || op === '%') && r === 0) throw new CalculatorError('division by zero');
      v = op === '*' ? v * r : op === '/' ? v / r : v % r;
    }
    return v;
  };
  const unary = (): number => {
    if (isOp('-')) {
      pos++;
      return -unary();
    }
    if (isOp('+')) {
      pos++;
      return unary();
    }
    return power();
  };
  const power = (): number => {
    const base = primary();
    if (isOp('^')) {
      pos++;
      return Math.pow(base, unary());
    }
    return base;
  };
  const primary = (): number => {
    const t = peek();
    if (!t) throw new CalculatorError('unexpected end of expression');
    if (t.kind === 'num') {
      pos++;
      return t.value;
    }
    if (t.kind === 'id') {
      pos++;
      if (isOp('(')) {
        const f = FUNCTIONS[t.value];
        if (!f) throw new CalculatorError(`unknown function '${t.value}'`);
        pos++;
        const args: number[] = [];
        if (!isOp(')')) {
          args.push(nested());
          while (isOp(',')) {
            pos++;
            args.push(nested());
          }
        }
        expect(')');
        if (args.length < f.arity[0] || args.length > f.arity[1]) throw new CalculatorError(`wrong number of arguments for ${t.value}`);
        return f.fn(...args);
      }
      if (t.value in CONSTANTS) return CONSTANTS[t.value];
      throw new CalculatorError(`unknown name '${t.value}'`);
    }
    if (t.value === '(') {
      pos++;
      const v = nested();
      expect(')');
      return v;
    }
    throw new CalculatorError(`unexpected '${t.value}'`);
  };
  const nested = (): number => {
    if (++depth > 100) throw new CalculatorError('expression nested too deeply');
    try {
      return expr();
    } finally {
      depth--;
    }
  };

  if (tokens.length === 0) throw new CalculatorError('empty expression');
  const value = nested();
  if (pos < tokens.length) throw new CalculatorError(`unexpected '${String(tokens[pos].value)}'`);
  if (!Number.isFinite(value)) throw new CalculatorError('result is not a finite number');
  return value;
}
