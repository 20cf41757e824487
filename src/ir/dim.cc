// Dims as integer polynomials over symbols: parsing, the canonical printed form, exact
// arithmetic, evaluation, and the one-unknown solver plans use to bind run-time symbols.
#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <unordered_map>

#include "ubfuse/error.h"
#include "ubfuse/shape.h"

namespace ubfuse {

namespace {

using Factors = std::vector<std::string>;  // sorted; a power repeats its symbol

// The printing order, which is also a monomial order (graded lexicographic, a symbol that sorts
// first weighing most), so the first term is the leading term polynomial division needs.
struct TermOrder {
  bool operator()(const Factors& a, const Factors& b) const {
    if (a.size() != b.size()) return a.size() > b.size();
    return a < b;
  }
};
using Poly = std::map<Factors, int64_t, TermOrder>;  // nonzero coefficients only

// Expanding products of sums can grow without bound; real shapes stay far below this.
constexpr size_t kMaxTerms = 256;

const char* const kSyntax =
    "a dim is an integer, a symbol (letters, digits, '_', '.', '$', ':') or an expression of "
    "them with '+', '-' and '*', e.g. \"past+seq\", \"2*seq-1\", \"batch*seq\"";

[[noreturn]] void overflow(const std::string& what) {
  throw Error("dim arithmetic overflows 64 bits in " + what +
              "; hint: check the sizes and symbol values that reach this shape");
}

// INT64_MIN is excluded so that every coefficient can be negated and printed back.
int64_t checked_add(int64_t a, int64_t b, const std::string& what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r) || r == INT64_MIN) overflow(what);
  return r;
}

int64_t checked_mul(int64_t a, int64_t b, const std::string& what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r) || r == INT64_MIN) overflow(what);
  return r;
}

void add_term(Poly& p, const Factors& f, int64_t c, const std::string& what) {
  if (c == 0) return;
  auto [it, fresh] = p.emplace(f, c);
  if (!fresh) {
    it->second = checked_add(it->second, c, what);
    if (it->second == 0) p.erase(it);
  }
  if (p.size() > kMaxTerms) {
    throw Error("dim " + what + " has more than " + std::to_string(kMaxTerms) +
                " terms; hint: give the model static sizes for some of its symbols");
  }
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '$' || c == ':';
}

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  Poly parse() {
    Poly p;
    skip();
    if (i_ == s_.size()) fail("it is empty");
    bool neg = false;
    if (s_[i_] == '-') {
      neg = true;
      i_++;
      skip();
    }
    while (true) {
      auto [f, c] = term();
      add_term(p, f, neg ? -c : c, "'" + s_ + "'");
      skip();
      if (i_ == s_.size()) return p;
      if (s_[i_] != '+' && s_[i_] != '-') fail("expected '+', '-' or '*'");
      neg = s_[i_] == '-';
      i_++;
      skip();
    }
  }

 private:
  void skip() {
    while (i_ < s_.size() && s_[i_] == ' ') i_++;
  }

  [[noreturn]] void fail(const std::string& what) {
    std::string at = i_ < s_.size()
                         ? " at '" + s_.substr(i_, 1) + "' (position " + std::to_string(i_) + ")"
                         : "";
    throw Error("invalid dim '" + s_ + "': " + what + at + "; hint: " + kSyntax);
  }

  std::pair<Factors, int64_t> term() {
    Factors f;
    int64_t c = 1;
    while (true) {
      size_t from = i_;
      while (i_ < s_.size() && is_name_char(s_[i_])) i_++;
      std::string tok = s_.substr(from, i_ - from);
      if (tok.empty()) {
        i_ = from;
        fail("expected a number or a symbol");
      }
      if (std::all_of(tok.begin(), tok.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
        int64_t v = 0;
        for (char ch : tok) {
          if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, ch - '0', &v)) {
            i_ = from;
            fail("the number " + tok + " does not fit 64 bits");
          }
        }
        c = checked_mul(c, v, "'" + s_ + "'");
      } else {
        f.push_back(std::move(tok));
      }
      skip();
      if (i_ == s_.size() || s_[i_] != '*') break;
      i_++;
      skip();
    }
    std::sort(f.begin(), f.end());
    return {std::move(f), c};
  }

  const std::string& s_;
  size_t i_ = 0;
};

std::string print(const Poly& p) {
  std::string out;
  for (auto& [f, c] : p) {
    out += c < 0 ? "-" : out.empty() ? "" : "+";
    std::string mag = std::to_string(c < 0 ? -c : c);  // c != INT64_MIN (checked_*)
    if (f.empty()) {
      out += mag;
      continue;
    }
    if (c != 1 && c != -1) out += mag + "*";
    for (size_t k = 0; k < f.size(); k++) out += (k ? "*" : "") + f[k];
  }
  return out;
}

}  // namespace

// Builds Dims from polynomials already in canonical form, without parsing them again.
struct DimAccess {
  static Poly poly(const Dim& d) {
    Poly p;
    if (d.is_static()) {
      if (d.value() == INT64_MIN) overflow(d.str());  // its negation would not fit
      if (d.value() != 0) p[{}] = d.value();
      return p;
    }
    return Parser(d.symbol()).parse();
  }
  static Dim make(const Poly& p) {
    if (p.empty()) return Dim(int64_t(0));
    if (p.size() == 1 && p.begin()->first.empty()) return Dim(p.begin()->second);
    Dim d;
    d.value_ = print(p);
    return d;
  }
};

namespace {

Poly poly_of(const Dim& d) { return DimAccess::poly(d); }
Dim dim_of(const Poly& p) { return DimAccess::make(p); }

std::string what2(const char* op, const Dim& a, const Dim& b) {
  return "(" + a.str() + ")" + op + "(" + b.str() + ")";
}

Factors merge(const Factors& a, const Factors& b) {
  Factors f;
  f.reserve(a.size() + b.size());
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(f));
  return f;
}

Poly poly_mul(const Poly& a, const Poly& b, const std::string& what) {
  Poly out;
  for (auto& [fa, ca] : a) {
    for (auto& [fb, cb] : b) add_term(out, merge(fa, fb), checked_mul(ca, cb, what), what);
  }
  return out;
}

// The factors of `m` left after removing those of `d`, when d's are a sub-multiset of m's.
std::optional<Factors> divide_monomial(const Factors& m, const Factors& d) {
  if (!std::includes(m.begin(), m.end(), d.begin(), d.end())) return std::nullopt;
  Factors q;
  std::set_difference(m.begin(), m.end(), d.begin(), d.end(), std::back_inserter(q));
  return q;
}

}  // namespace

Dim::Dim(const char* expr) : Dim(std::string(expr)) {}

Dim::Dim(std::string expr) : value_(int64_t(0)) { *this = dim_of(Parser(expr).parse()); }

bool Dim::is_symbol() const {
  if (is_static()) return false;
  const std::string& s = symbol();
  return std::all_of(s.begin(), s.end(), is_name_char);  // canonical: a lone name has no syntax
}

int64_t Dim::value() const {
  if (!is_static()) throw Error("dim '" + symbol() + "' is symbolic, a fixed size was needed");
  return std::get<int64_t>(value_);
}

const std::string& Dim::symbol() const {
  UBF_CHECK(!is_static(), "symbol() of a static dim");
  return std::get<std::string>(value_);
}

std::string Dim::str() const { return is_static() ? std::to_string(value()) : symbol(); }

std::vector<Dim::Term> Dim::terms() const {
  std::vector<Term> out;
  for (auto& [f, c] : poly_of(*this)) out.push_back({c, f});
  return out;
}

std::vector<std::string> Dim::symbols() const {
  std::set<std::string> names;
  if (!is_static()) {
    for (auto& [f, c] : poly_of(*this)) names.insert(f.begin(), f.end());
  }
  return {names.begin(), names.end()};
}

Dim Dim::add(const Dim& a, const Dim& b) {
  std::string what = what2("+", a, b);
  if (a.is_static() && b.is_static()) {
    int64_t r;
    if (__builtin_add_overflow(a.value(), b.value(), &r)) overflow(what);
    return Dim(r);
  }
  Poly p = poly_of(a);
  for (auto& [f, c] : poly_of(b)) add_term(p, f, c, what);
  return dim_of(p);
}

Dim Dim::sub(const Dim& a, const Dim& b) {
  std::string what = what2("-", a, b);
  if (a.is_static() && b.is_static()) {
    int64_t r;
    if (__builtin_sub_overflow(a.value(), b.value(), &r)) overflow(what);
    return Dim(r);
  }
  Poly p = poly_of(a);
  for (auto& [f, c] : poly_of(b)) add_term(p, f, checked_mul(c, -1, what), what);
  return dim_of(p);
}

Dim Dim::mul(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) {
    int64_t r;
    if (__builtin_mul_overflow(a.value(), b.value(), &r)) overflow(what2("*", a, b));
    return Dim(r);
  }
  if (a.is_static() && a.value() == 1) return b;
  if (b.is_static() && b.value() == 1) return a;
  return dim_of(poly_mul(poly_of(a), poly_of(b), what2("*", a, b)));
}

std::optional<Dim> Dim::floordiv(const Dim& a, int64_t k) {
  if (k <= 0) {
    throw Error("floor division of dim '" + a.str() + "' by " + std::to_string(k) +
                ": the divisor must be positive");
  }
  auto floor_div = [k](int64_t x) { return x / k - (x % k != 0 && x < 0 ? 1 : 0); };
  if (a.is_static()) return Dim(floor_div(a.value()));
  Poly q;
  for (auto& [f, c] : poly_of(a)) {
    if (!f.empty() && c % k != 0) return std::nullopt;
    if (int64_t v = floor_div(c); v != 0) q[f] = v;
  }
  return dim_of(q);
}

std::optional<Dim> Dim::div_exact(const Dim& a, const Dim& b) {
  if (b.is_static()) {
    if (b.value() == 0) return std::nullopt;
    if (a.is_static()) {
      if (a.value() % b.value() != 0) return std::nullopt;
      return Dim(a.value() / b.value());
    }
  }
  if (a == b) return Dim(1);
  // Long division by the leading term: over the integers b divides a exactly when every step
  // divides (r stays a multiple of b, and lt(b * q) = lt(b) * lt(q)).
  std::string what = what2("/", a, b);
  Poly r = poly_of(a), d = poly_of(b), q;
  const auto& [lf, lc] = *d.begin();
  while (!r.empty()) {
    const auto& [rf, rc] = *r.begin();
    auto f = divide_monomial(rf, lf);
    if (!f || rc % lc != 0) return std::nullopt;
    Poly t{{*f, rc / lc}};
    add_term(q, *f, rc / lc, what);
    for (auto& [pf, pc] : poly_mul(t, d, what)) add_term(r, pf, checked_mul(pc, -1, what), what);
  }
  return dim_of(q);
}

namespace {

std::string values_of(const Poly& p, const SymbolBindings& b) {
  std::set<std::string> names;
  for (auto& [f, c] : p) names.insert(f.begin(), f.end());
  std::string out;
  for (auto& n : names) {
    auto it = b.find(n);
    out += (out.empty() ? "" : ", ") + n + "=" +
           (it == b.end() ? std::string("?") : std::to_string(it->second));
  }
  return out;
}

// Sum of the terms of p under b, skipping terms that mention `skip`; nullopt when another
// symbol is unbound.
std::optional<int64_t> eval_poly(const Dim& d, const Poly& p, const SymbolBindings& b,
                                 const std::string* skip) {
  auto fail = [&]() -> int64_t {
    throw Error("dim '" + d.str() + "' overflows a 64-bit size with " + values_of(p, b) +
                "; hint: check the symbol values (input shapes, gears)");
  };
  int64_t sum = 0;
  for (auto& [f, c] : p) {
    if (skip && std::find(f.begin(), f.end(), *skip) != f.end()) continue;
    int64_t v = c;
    for (auto& s : f) {
      auto it = b.find(s);
      if (it == b.end()) return std::nullopt;
      if (__builtin_mul_overflow(v, it->second, &v)) fail();
    }
    if (__builtin_add_overflow(sum, v, &sum)) fail();
  }
  return sum;
}

}  // namespace

namespace {
// Plans evaluate the same few compound dims ("past+seq") for every new shape: each is parsed once
// per thread (a bounded cache; cleared when full).
const Poly& parsed(const Dim& d) {
  thread_local std::unordered_map<std::string, Poly> cache;
  auto it = cache.find(d.symbol());
  if (it != cache.end()) return it->second;
  if (cache.size() >= 1024) cache.clear();
  return cache.emplace(d.symbol(), poly_of(d)).first->second;
}
}  // namespace

std::optional<int64_t> eval_dim(const Dim& d, const SymbolBindings& b) {
  if (d.is_static()) return d.value();
  // Most symbolic dims are one name ("seq"); plans evaluate every value's dims per new shape.
  if (d.is_symbol()) {
    auto it = b.find(d.symbol());
    return it == b.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }
  return eval_poly(d, parsed(d), b, nullptr);
}

std::optional<DimSolution> solve_dim(const Dim& d, int64_t value, const SymbolBindings& b,
                                     std::string* why) {
  auto no = [&](const std::string& w) -> std::optional<DimSolution> {
    if (why) *why = w;
    return std::nullopt;
  };
  if (d.is_static()) return no("it is a fixed size");
  const Poly& p = parsed(d);
  std::set<std::string> unbound_set;
  for (auto& [f, k] : p) {
    for (auto& s : f) {
      if (!b.count(s)) unbound_set.insert(s);
    }
  }
  std::vector<std::string> unbound(unbound_set.begin(), unbound_set.end());
  if (unbound.empty()) return no("every symbol of it is bound already");
  if (unbound.size() > 1) {
    std::string list;
    for (auto& s : unbound) list += (list.empty() ? "'" : ", '") + s + "'";
    return no("its symbols " + list + " are all unbound, one value cannot give them all");
  }
  const std::string& u = unbound[0];
  int64_t c = 0;
  for (auto& [f, k] : p) {
    if (std::find(f.begin(), f.end(), u) == f.end()) continue;
    if (f.size() != 1) return no("'" + u + "' appears in a product");
    c = k;
  }
  int64_t rest = *eval_poly(d, p, b, &u);
  int64_t num;
  if (__builtin_sub_overflow(value, rest, &num)) return no("the value overflows 64 bits");
  if (num % c != 0) {
    return no("no whole " + u + " gives " + std::to_string(value) + " (" + std::to_string(num) +
              " is not a multiple of " + std::to_string(c) + ")");
  }
  if (num / c < 0) return no("it needs " + u + "=" + std::to_string(num / c) + ", below 0");
  return DimSolution{u, num / c};
}

}  // namespace ubfuse
