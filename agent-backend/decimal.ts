/**
 * Exact addition of decimal strings (prices arrive as strings; floats would drift when summed).
 */
const DECIMAL_RE = /^(-)?(\d+)(?:\.(\d+))?$/;

function parse(value: string): { int: bigint; scale: number } {
  let v = value.trim();
  if (/e/i.test(v) && Number.isFinite(Number(v))) v = Number(v).toFixed(20);
  const m = DECIMAL_RE.exec(v);
  if (!m) return { int: 0n, scale: 0 };
  const frac = m[3] ?? '';
  const int = BigInt(m[2] + frac) * (m[1] ? -1n : 1n);
  return { int, scale: frac.length };
}

export function addDecimal(a: string, b: string): string {
  const x = parse(a);
  const y = parse(b);
  const scale = Math.max(x.scale, y.scale);
  const sum = x.int * 10n ** BigInt(scale - x.scale) + y.int * 10n ** BigInt(scale - y.scale);
  return format(sum, scale);
}

function format(value: bigint, scale: number): string {
  const negative = value < 0n;
  let digits = (negative ? -value : value).toString();
  if (scale > 0) {
    digits = digits.padStart(scale + 1, '0');
    let int = digits.slice(0, digits.length - scale);
    let frac = digits.slice(digits.length - scale).replace(/0+$/, '');
    if (!int) int = '0';
    digits = frac ? `${int}.${frac}` : int;
    frac = '';
  }
  return negative && digits !== '0' ? `-${digits}` : digits;
}
