/*
 * qregex.c: the regular expressions of quantization configs, matched the way
 * Python's re.match does (anchored at the start of the name only): the "re:"
 * targets and ignore entries of compressed-tensors, and GPTQModel's
 * "dynamic" patterns (notes/quant-formats.md sections 2.5 and 4.5).
 *
 * Configs are untrusted input, so this is a Thompson-style NFA simulation:
 * time O(len(name) * len(program)), no backtracking, no recursion on the
 * input; the parser's nesting depth and the program size are bounded.  The
 * syntax is the subset of Python's that says only which names match:
 * literals, ".", classes [...] with ranges and negation, \d \D \w \W \s \S
 * (ASCII; any byte >= 0x80 counts as a word character), escaped
 * metacharacters, \t \n \r \f \v \a \xhh, \A and \Z, ^ and $, groups (...)
 * and (?:...), alternation, * + ? {m} {m,} {,n} {m,n} and their lazy forms
 * (laziness does not change whether a name matches).  Everything else
 * Python has (lookarounds, backreferences, \b, named groups, inline flags,
 * possessive quantifiers) is refused with a message, never guessed at: a
 * pattern read differently than Python reads it would quantize or ignore the
 * wrong modules.  Names are matched as bytes (module names are ASCII).
 */
#include "forge/format/quant/qconfig.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RX_MAX_PATTERN 512
#define RX_MAX_NODES 1024
#define RX_MAX_PROG 2048
#define RX_MAX_CLASSES 256
#define RX_MAX_DEPTH 64
#define RX_INF (-1)
/* What the parser and generator return instead of an index when they fail (r->error says why). */
#define RX_FAIL (-1)

enum { N_EMPTY, N_CLASS, N_CAT, N_ALT, N_REPEAT, N_BOL, N_EOL, N_EOS };
enum { OP_CHAR, OP_SPLIT, OP_JMP, OP_MATCH, OP_BOL, OP_EOL, OP_EOS };

struct rx_node {
	int type, a, b, min, max; /* CLASS: a = class; CAT/ALT: a, b children; REPEAT: a child */
};

struct rx_inst {
	int op, x, y;
};

struct rx {
	const char *s; /* pattern */
	size_t len, pos;
	struct rx_node nodes[RX_MAX_NODES];
	int n_nodes;
	uint8_t classes[RX_MAX_CLASSES][32];
	int n_classes;
	struct rx_inst prog[RX_MAX_PROG];
	int n_prog;
	const char *why; /* first error */
	size_t why_at;
};

static int rx_fail(struct rx *r, const char *why)
{
	if (!r->why) {
		r->why = why;
		r->why_at = r->pos;
	}
	return RX_FAIL;
}

static int rx_node(struct rx *r, int type, int a, int b)
{
	struct rx_node *n;

	if (r->n_nodes >= RX_MAX_NODES)
		return rx_fail(r, "pattern too long");
	n = &r->nodes[r->n_nodes];
	n->type = type;
	n->a = a;
	n->b = b;
	n->min = n->max = 0;
	return r->n_nodes++;
}

static int rx_class_new(struct rx *r)
{
	if (r->n_classes >= RX_MAX_CLASSES)
		return rx_fail(r, "too many character classes");
	memset(r->classes[r->n_classes], 0, 32);
	return r->n_classes++;
}

static void cls_set(uint8_t *c, unsigned ch)
{
	c[ch >> 3] = (uint8_t)(c[ch >> 3] | (1u << (ch & 7)));
}

static bool cls_has(const uint8_t *c, unsigned ch)
{
	return ((unsigned)c[ch >> 3] >> (ch & 7)) & 1u;
}

static bool is_digit(unsigned ch)
{
	return ch >= '0' && ch <= '9';
}

static bool is_word(unsigned ch)
{
	return is_digit(ch) || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch >= 0x80;
}

static bool is_space(unsigned ch)
{
	return ch == ' ' || (ch >= '\t' && ch <= '\r');
}

static bool is_alnum(unsigned ch)
{
	return is_digit(ch) || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

/* Add the set of \d \D \w \W \s \S (letter e) to c. */
static void cls_add_escape(uint8_t *c, char e)
{
	unsigned ch;

	for (ch = 0; ch < 256; ch++) {
		bool in = false;

		switch (e) {
		case 'd': in = is_digit(ch); break;
		case 'D': in = !is_digit(ch); break;
		case 'w': in = is_word(ch); break;
		case 'W': in = !is_word(ch); break;
		case 's': in = is_space(ch); break;
		case 'S': in = !is_space(ch); break;
		default: break;
		}
		if (in)
			cls_set(c, ch);
	}
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return RX_FAIL;
}

/*
 * The escape after a backslash at r->pos (which points past the backslash):
 * returns 0..255 for a literal byte, 256 + letter for a class escape
 * (\d ...), 512 + letter for an assertion (\A, \Z), or -1.
 */
static int rx_escape(struct rx *r, bool in_class)
{
	char e;

	if (r->pos >= r->len)
		return rx_fail(r, "pattern ends with a backslash");
	e = r->s[r->pos++];
	switch (e) {
	case 'd': case 'D': case 'w': case 'W': case 's': case 'S':
		return 256 + e;
	case 'A': case 'Z':
		if (in_class)
			return rx_fail(r, "bad escape in a character class");
		return 512 + e;
	case 't': return '\t';
	case 'n': return '\n';
	case 'r': return '\r';
	case 'f': return '\f';
	case 'v': return '\v';
	case 'a': return '\a';
	case 'x': {
		int h, l;

		if (r->pos + 2 > r->len || (h = hexval(r->s[r->pos])) < 0 || (l = hexval(r->s[r->pos + 1])) < 0)
			return rx_fail(r, "bad \\x escape");
		r->pos += 2;
		return h * 16 + l;
	}
	case 'b': case 'B':
		return rx_fail(r, "word boundaries (\\b, \\B) are not supported");
	default:
		break;
	}
	if (is_digit((unsigned char)e))
		return rx_fail(r, "backreferences and octal escapes are not supported");
	if (is_alnum((unsigned char)e))
		return rx_fail(r, "bad escape");
	return (unsigned char)e;
}

/* Try to read a {m}, {m,}, {,n} or {m,n} quantifier at r->pos ('{'); on success advance. */
static bool rx_braces(struct rx *r, int *min, int *max)
{
	size_t p = r->pos + 1;
	long m = -1, n = -1;
	bool comma = false;

	while (p < r->len && is_digit((unsigned char)r->s[p])) {
		m = (m < 0 ? 0 : m) * 10 + (r->s[p++] - '0');
		if (m > 100000)
			m = 100000;
	}
	if (p < r->len && r->s[p] == ',') {
		comma = true;
		p++;
		while (p < r->len && is_digit((unsigned char)r->s[p])) {
			n = (n < 0 ? 0 : n) * 10 + (r->s[p++] - '0');
			if (n > 100000)
				n = 100000;
		}
	}
	if (p >= r->len || r->s[p] != '}' || (m < 0 && !comma) || (m < 0 && n < 0 && comma))
		return false; /* not a quantifier: '{' is a literal */
	*min = m < 0 ? 0 : (int)m;
	*max = comma ? (n < 0 ? RX_INF : (int)n) : (int)m;
	r->pos = p + 1;
	return true;
}

static int rx_literal(struct rx *r, unsigned ch)
{
	int c = rx_class_new(r);

	if (c < 0)
		return RX_FAIL;
	cls_set(r->classes[c], ch);
	return rx_node(r, N_CLASS, c, 0);
}

static int rx_class(struct rx *r)
{
	bool neg = false, first = true;
	int c = rx_class_new(r), k;
	uint8_t *set;

	if (c < 0)
		return RX_FAIL;
	set = r->classes[c];
	if (r->pos < r->len && r->s[r->pos] == '^') {
		neg = true;
		r->pos++;
	}
	for (;;) {
		int lo, hi;

		if (r->pos >= r->len)
			return rx_fail(r, "unterminated character class");
		if (r->s[r->pos] == ']' && !first) {
			r->pos++;
			break;
		}
		first = false;
		if (r->s[r->pos] == '\\') {
			r->pos++;
			lo = rx_escape(r, true);
			if (lo < 0)
				return RX_FAIL;
			if (lo >= 256) {
				cls_add_escape(set, (char)(lo - 256));
				continue;
			}
		} else {
			lo = (unsigned char)r->s[r->pos++];
		}
		hi = lo;
		if (r->pos + 1 < r->len && r->s[r->pos] == '-' && r->s[r->pos + 1] != ']') {
			r->pos++;
			if (r->s[r->pos] == '\\') {
				r->pos++;
				hi = rx_escape(r, true);
				if (hi < 0)
					return RX_FAIL;
				if (hi >= 256)
					return rx_fail(r, "bad character range");
			} else {
				hi = (unsigned char)r->s[r->pos++];
			}
			if (hi < lo)
				return rx_fail(r, "bad character range");
		}
		for (k = lo; k <= hi; k++)
			cls_set(set, (unsigned)k);
	}
	if (neg)
		for (k = 0; k < 32; k++)
			set[k] = (uint8_t)~set[k];
	return rx_node(r, N_CLASS, c, 0);
}

static int rx_alt(struct rx *r, int depth);

static int rx_atom(struct rx *r, int depth)
{
	char ch = r->s[r->pos];
	int c, k, lo, hi;

	switch (ch) {
	case '(':
		r->pos++;
		if (r->pos < r->len && r->s[r->pos] == '?') {
			if (r->pos + 1 < r->len && r->s[r->pos + 1] == ':')
				r->pos += 2;
			else
				return rx_fail(r, "(?...) extensions other than (?:...) are not supported");
		}
		k = rx_alt(r, depth + 1);
		if (k < 0)
			return RX_FAIL;
		if (r->pos >= r->len || r->s[r->pos] != ')')
			return rx_fail(r, "missing )");
		r->pos++;
		return k;
	case '[':
		r->pos++;
		return rx_class(r);
	case '.':
		r->pos++;
		c = rx_class_new(r);
		if (c < 0)
			return RX_FAIL;
		for (k = 0; k < 256; k++)
			if (k != '\n')
				cls_set(r->classes[c], (unsigned)k);
		return rx_node(r, N_CLASS, c, 0);
	case '^':
		r->pos++;
		return rx_node(r, N_BOL, 0, 0);
	case '$':
		r->pos++;
		return rx_node(r, N_EOL, 0, 0);
	case '\\':
		r->pos++;
		k = rx_escape(r, false);
		if (k < 0)
			return RX_FAIL;
		if (k >= 512)
			return rx_node(r, k == 512 + 'A' ? N_BOL : N_EOS, 0, 0);
		if (k >= 256) {
			c = rx_class_new(r);
			if (c < 0)
				return RX_FAIL;
			cls_add_escape(r->classes[c], (char)(k - 256));
			return rx_node(r, N_CLASS, c, 0);
		}
		return rx_literal(r, (unsigned)k);
	case '*':
	case '+':
	case '?':
		return rx_fail(r, "nothing to repeat");
	case '{':
		if (rx_braces(r, &lo, &hi))
			return rx_fail(r, "nothing to repeat");
		r->pos++;
		return rx_literal(r, '{');
	default:
		r->pos++;
		return rx_literal(r, (unsigned char)ch);
	}
}

static int rx_repeat(struct rx *r, int depth)
{
	int a = rx_atom(r, depth), min, max, n;

	if (a < 0)
		return RX_FAIL;
	if (r->pos >= r->len)
		return a;
	switch (r->s[r->pos]) {
	case '*':
		min = 0, max = RX_INF, r->pos++;
		break;
	case '+':
		min = 1, max = RX_INF, r->pos++;
		break;
	case '?':
		min = 0, max = 1, r->pos++;
		break;
	case '{':
		if (!rx_braces(r, &min, &max))
			return a;
		if (max != RX_INF && max < min)
			return rx_fail(r, "min repeat greater than max repeat");
		break;
	default:
		return a;
	}
	if (r->nodes[a].type == N_BOL || r->nodes[a].type == N_EOL || r->nodes[a].type == N_EOS)
		return rx_fail(r, "nothing to repeat");
	if (r->pos < r->len && r->s[r->pos] == '?')
		r->pos++; /* lazy: the same names match */
	if (r->pos < r->len) {
		char nx = r->s[r->pos];
		int m2, x2;
		size_t save = r->pos;

		if (nx == '*' || nx == '+' || nx == '?')
			return rx_fail(r, "multiple repeat (or a possessive quantifier, not supported)");
		if (nx == '{' && rx_braces(r, &m2, &x2)) {
			r->pos = save;
			return rx_fail(r, "multiple repeat");
		}
	}
	n = rx_node(r, N_REPEAT, a, 0);
	if (n < 0)
		return RX_FAIL;
	r->nodes[n].min = min;
	r->nodes[n].max = max;
	return n;
}

static int rx_cat(struct rx *r, int depth)
{
	int left = rx_node(r, N_EMPTY, 0, 0);

	while (left >= 0 && r->pos < r->len && r->s[r->pos] != '|' && r->s[r->pos] != ')') {
		int right = rx_repeat(r, depth);

		if (right < 0)
			return RX_FAIL;
		left = rx_node(r, N_CAT, left, right);
	}
	return left;
}

static int rx_alt(struct rx *r, int depth)
{
	int left;

	if (depth > RX_MAX_DEPTH)
		return rx_fail(r, "groups nested too deeply");
	left = rx_cat(r, depth);
	while (left >= 0 && r->pos < r->len && r->s[r->pos] == '|') {
		int right;

		r->pos++;
		right = rx_cat(r, depth);
		if (right < 0)
			return RX_FAIL;
		left = rx_node(r, N_ALT, left, right);
	}
	return left;
}

static int rx_emit(struct rx *r, int op, int x, int y)
{
	if (r->n_prog >= RX_MAX_PROG)
		return rx_fail(r, "pattern too complex");
	r->prog[r->n_prog].op = op;
	r->prog[r->n_prog].x = x;
	r->prog[r->n_prog].y = y;
	return r->n_prog++;
}

/* Emit node n; the nesting of emitted code follows the parse tree, whose depth is bounded. */
static int rx_gen(struct rx *r, int n)
{
	const struct rx_node *nd = &r->nodes[n];
	int i, s, j;

	switch (nd->type) {
	case N_EMPTY:
		return 0;
	case N_CLASS:
		return rx_emit(r, OP_CHAR, nd->a, 0) < 0 ? -1 : 0;
	case N_BOL:
		return rx_emit(r, OP_BOL, 0, 0) < 0 ? -1 : 0;
	case N_EOL:
		return rx_emit(r, OP_EOL, 0, 0) < 0 ? -1 : 0;
	case N_EOS:
		return rx_emit(r, OP_EOS, 0, 0) < 0 ? -1 : 0;
	case N_CAT:
		return rx_gen(r, nd->a) < 0 || rx_gen(r, nd->b) < 0 ? -1 : 0;
	case N_ALT:
		s = rx_emit(r, OP_SPLIT, 0, 0);
		if (s < 0)
			return RX_FAIL;
		r->prog[s].x = r->n_prog;
		if (rx_gen(r, nd->a) < 0 || (j = rx_emit(r, OP_JMP, 0, 0)) < 0)
			return RX_FAIL;
		r->prog[s].y = r->n_prog;
		if (rx_gen(r, nd->b) < 0)
			return RX_FAIL;
		r->prog[j].x = r->n_prog;
		return 0;
	case N_REPEAT:
		for (i = 0; i < nd->min; i++)
			if (rx_gen(r, nd->a) < 0)
				return RX_FAIL;
		if (nd->max == RX_INF) {
			s = rx_emit(r, OP_SPLIT, 0, 0);
			if (s < 0)
				return RX_FAIL;
			r->prog[s].x = r->n_prog;
			if (rx_gen(r, nd->a) < 0 || rx_emit(r, OP_JMP, s, 0) < 0)
				return RX_FAIL;
			r->prog[s].y = r->n_prog;
			return 0;
		}
		for (i = nd->min; i < nd->max; i++) {
			s = rx_emit(r, OP_SPLIT, 0, 0);
			if (s < 0)
				return RX_FAIL;
			r->prog[s].x = r->n_prog;
			if (rx_gen(r, nd->a) < 0)
				return RX_FAIL;
			r->prog[s].y = r->n_prog;
		}
		return 0;
	}
	return rx_fail(r, "internal error");
}

/* ---- simulation ------------------------------------------------------------------- */

struct rx_run {
	int list[2][RX_MAX_PROG];
	int n[2];
	unsigned mark[RX_MAX_PROG];
	int stack[2 * RX_MAX_PROG + 2];
	unsigned gen;
};

/* Follow the empty transitions from pc at position pos; true when MATCH is reached. */
static bool rx_add(const struct rx *r, struct rx_run *v, int which, int pc, size_t pos,
		   const char *name, size_t len)
{
	int sp = 0;

	v->stack[sp++] = pc;
	while (sp) {
		const struct rx_inst *in;

		pc = v->stack[--sp];
		if (v->mark[pc] == v->gen)
			continue;
		v->mark[pc] = v->gen;
		in = &r->prog[pc];
		switch (in->op) {
		case OP_MATCH:
			return true;
		case OP_JMP:
			v->stack[sp++] = in->x;
			break;
		case OP_SPLIT:
			v->stack[sp++] = in->y;
			v->stack[sp++] = in->x;
			break;
		case OP_BOL:
			if (pos == 0)
				v->stack[sp++] = pc + 1;
			break;
		case OP_EOL:
			if (pos == len || (pos + 1 == len && name[pos] == '\n'))
				v->stack[sp++] = pc + 1;
			break;
		case OP_EOS:
			if (pos == len)
				v->stack[sp++] = pc + 1;
			break;
		default: /* OP_CHAR */
			v->list[which][v->n[which]++] = pc;
			break;
		}
	}
	return false;
}

static bool rx_exec(const struct rx *r, struct rx_run *v, const char *name)
{
	size_t len = strlen(name), pos;
	int cur = 0, i;

	memset(v->mark, 0, sizeof(v->mark[0]) * (size_t)r->n_prog);
	v->gen = 1;
	v->n[0] = v->n[1] = 0;
	if (rx_add(r, v, cur, 0, 0, name, len))
		return true;
	for (pos = 0; pos < len && v->n[cur]; pos++) {
		int nxt = cur ^ 1;

		v->gen++;
		v->n[nxt] = 0;
		for (i = 0; i < v->n[cur]; i++) {
			const struct rx_inst *in = &r->prog[v->list[cur][i]];

			if (cls_has(r->classes[in->x], (unsigned char)name[pos]) &&
			    rx_add(r, v, nxt, v->list[cur][i] + 1, pos + 1, name, len))
				return true;
		}
		cur = nxt;
	}
	return false;
}

/* The compiler and the runner: about 90 KB, allocated per call (below glibc's mmap threshold). */
struct rx_all {
	struct rx r;
	struct rx_run v;
};

int fg_qpattern_match(const char *pattern, const char *name, bool *matched, struct fg_err *err)
{
	struct rx_all *all;
	struct rx *r;
	int root, rc = 0;

	if (!pattern || !name || !matched)
		return fg_err_set(err, FG_EUSAGE, "fg_qpattern_match: NULL argument");
	*matched = false;
	if (strlen(pattern) > RX_MAX_PATTERN)
		return fg_err_set(err, FG_EINPUT, "quantization config: regular expression of %zu bytes is too long (at most %d)",
				  strlen(pattern), RX_MAX_PATTERN);
	all = malloc(sizeof(*all));
	if (!all)
		return fg_err_set(err, FG_ENOMEM, "quantization config: out of memory matching a regular expression");
	r = &all->r;
	r->s = pattern;
	r->len = strlen(pattern);
	r->pos = 0;
	r->n_nodes = r->n_classes = r->n_prog = 0;
	r->why = NULL;
	root = rx_alt(r, 0);
	if (root >= 0 && r->pos < r->len)
		rx_fail(r, "unbalanced parenthesis");
	if (root >= 0 && !r->why)
		(void)(rx_gen(r, root) < 0 || rx_emit(r, OP_MATCH, 0, 0) < 0);
	if (r->why)
		rc = fg_err_set(err, FG_EINPUT, "quantization config: regular expression '%.200s': %s at position %zu",
				pattern, r->why, r->why_at);
	else
		*matched = rx_exec(r, &all->v, name);
	free(all);
	return rc;
}
