#include "engine/nft/portmap_conditions.hpp"

#include <netinet/in.h>

#include <linux/netfilter/nf_tables.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <libnftnl/expr.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <string_view>

#include "engine/base/text.hpp"
#include "engine/kernel/ifname.hpp"
#include "engine/nft/expr.hpp"

namespace plumb::nft {
namespace {

struct TypeName {
  std::string_view name;  // upper case, as iptables' addrtype
  uint32_t rtn;
};
constexpr std::array<TypeName, 8> kTypes = {{{"UNICAST", RTN_UNICAST},
                                             {"LOCAL", RTN_LOCAL},
                                             {"BROADCAST", RTN_BROADCAST},
                                             {"ANYCAST", RTN_ANYCAST},
                                             {"MULTICAST", RTN_MULTICAST},
                                             {"BLACKHOLE", RTN_BLACKHOLE},
                                             {"UNREACHABLE", RTN_UNREACHABLE},
                                             {"PROHIBIT", RTN_PROHIBIT}}};

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
  return s;
}

/// Reads the tokens one by one, naming the key in errors.
class Tokens {
 public:
  /// iptables syntax: one argument per element (as the reference hands them to iptables);
  /// nftables syntax: the elements joined with spaces (knftables.Concat), so split on them.
  Tokens(const std::vector<std::string>& list, std::string key, bool split) : key_(std::move(key)) {
    for (auto& item : list) {
      if (!split) {
        t_.emplace_back(text::trim(item));
        continue;
      }
      for (auto t : text::split(item, ' ')) {
        if (!text::trim(t).empty()) t_.emplace_back(text::trim(t));
      }
    }
  }
  [[nodiscard]] bool done() const { return i_ >= t_.size(); }
  [[nodiscard]] const std::string& peek() const { return t_[i_]; }
  std::string next() { return t_[i_++]; }
  Result<std::string> value(const std::string& after) {
    if (done()) return fail(cni_code::kInvalidConfig, key_ + ": \"" + after + "\" needs a value");
    return next();
  }
  [[nodiscard]] std::unexpected<Error> unsupported(const std::string& token, const std::string& why = {}) const {
    return fail(cni_code::kUnsupportedField, key_ + ": condition \"" + token + "\" is not supported by plumb's portmap" +
                                                 (why.empty() ? std::string() : " (" + why + ")") +
                                                 "; supported: -s, -d, -i, -p, -m addrtype --src-type/--dst-type, -m comment, "
                                                 "their negation with !, or ip/ip6 saddr/daddr, iifname, meta l4proto, fib type");
  }
  [[nodiscard]] const std::string& key() const { return key_; }
  [[nodiscard]] std::string joined() const {
    std::string s;
    for (auto& t : t_) s += (s.empty() ? "" : " ") + t;
    return s;
  }

 private:
  std::vector<std::string> t_;
  size_t i_ = 0;
  std::string key_;
};

Result<IpPrefix> prefix_of(const std::string& v, int family, const std::string& key) {
  auto p = IpPrefix::parse(v, /*allow_bare=*/true);
  if (!p) return fail(cni_code::kInvalidConfig, key + ": \"" + v + "\" is not an address or prefix");
  if (p->addr.family != family) {
    return fail(cni_code::kInvalidConfig, key + ": " + v + " is not an " + (family == AF_INET ? "IPv4" : "IPv6") + " address");
  }
  return *p;
}

Result<uint8_t> l4proto_of(const std::string& v, const std::string& key) {
  std::string p = upper(v);
  if (p == "TCP") return static_cast<uint8_t>(IPPROTO_TCP);
  if (p == "UDP") return static_cast<uint8_t>(IPPROTO_UDP);
  if (p == "SCTP") return static_cast<uint8_t>(IPPROTO_SCTP);
  return fail(cni_code::kInvalidConfig, key + ": protocol \"" + v + "\" must be tcp, udp or sctp");
}

Result<uint32_t> rtn_of(const std::string& v, const std::string& key) {
  auto it = std::find_if(kTypes.begin(), kTypes.end(), [&](const TypeName& t) { return t.name == upper(v); });
  if (it == kTypes.end()) return fail(cni_code::kUnsupportedField, key + ": address type \"" + v + "\" is not supported (one type, e.g. LOCAL)");
  return it->rtn;
}

Result<std::string> ifname_of(const std::string& v, const std::string& key) {
  if (!link::valid_ifname(v)) {
    return fail(cni_code::kInvalidConfig, key + ": \"" + v + "\" is not an interface name (" + std::string(link::kIfnameRule) + ")");
  }
  return v;
}

/// One iptables match (after an optional "!").
Status iptables_match(Tokens& t, int family, bool negate, std::vector<Match>& out) {
  const std::string tok = t.next();
  const std::string& key = t.key();
  Match m;
  m.negate = negate;
  if (tok == "-s" || tok == "--source" || tok == "--src" || tok == "-d" || tok == "--destination" || tok == "--dst") {
    m.kind = tok[1] == 's' || tok == "--source" || tok == "--src" ? Match::Kind::Saddr : Match::Kind::Daddr;
    m.prefix = PLUMB_TRY(prefix_of(PLUMB_TRY(t.value(tok)), family, key));
  } else if (tok == "-i" || tok == "--in-interface") {
    m.kind = Match::Kind::Iifname;
    m.name = PLUMB_TRY(ifname_of(PLUMB_TRY(t.value(tok)), key));
  } else if (tok == "-p" || tok == "--protocol") {
    m.kind = Match::Kind::L4proto;
    m.l4proto = PLUMB_TRY(l4proto_of(PLUMB_TRY(t.value(tok)), key));
  } else if (tok == "-o" || tok == "--out-interface") {
    return t.unsupported(tok, "host ports are DNATed before routing chooses the output interface");
  } else if ((tok == "-m" || tok == "--match") && !negate) {
    const std::string module = PLUMB_TRY(t.value(tok));
    if (module == "comment") {
      if (t.done() || t.peek() != "--comment") return fail(cni_code::kInvalidConfig, key + ": \"-m comment\" needs --comment");
      t.next();
      (void)PLUMB_TRY(t.value("--comment"));
      return {};
    }
    if (module != "addrtype") return t.unsupported("-m " + module);
    bool any = false;
    while (!t.done()) {
      bool neg = t.peek() == "!";
      if (neg) t.next();
      if (t.done() || (t.peek() != "--dst-type" && t.peek() != "--src-type")) {
        if (neg) return fail(cni_code::kInvalidConfig, key + ": \"!\" without --src-type/--dst-type after -m addrtype");
        break;
      }
      Match a;
      a.negate = neg;
      const std::string opt = t.next();
      a.kind = opt == "--dst-type" ? Match::Kind::FibDaddrType : Match::Kind::FibSaddrType;
      a.rtn_type = PLUMB_TRY(rtn_of(PLUMB_TRY(t.value(opt)), key));
      out.push_back(a);
      any = true;
    }
    if (!any) return fail(cni_code::kInvalidConfig, key + ": \"-m addrtype\" needs --src-type or --dst-type");
    return {};
  } else {
    return t.unsupported((negate ? "! " : "") + tok);
  }
  out.push_back(m);
  return {};
}

/// One nftables statement.
Status nftables_match(Tokens& t, int family, std::vector<Match>& out) {
  const std::string& key = t.key();
  std::string tok = t.next();
  Match m;
  auto negation = [&]() {
    if (!t.done() && t.peek() == "!=") {
      t.next();
      m.negate = true;
    } else if (!t.done() && (t.peek() == "==" || t.peek() == "eq")) {
      t.next();
    }
  };
  if (tok == "ip" || tok == "ip6") {
    if ((tok == "ip") != (family == AF_INET)) return t.unsupported(tok, "the other family's header");
    const std::string field = PLUMB_TRY(t.value(tok));
    if (field != "saddr" && field != "daddr") return t.unsupported(tok + " " + field);
    m.kind = field == "saddr" ? Match::Kind::Saddr : Match::Kind::Daddr;
    negation();
    m.prefix = PLUMB_TRY(prefix_of(PLUMB_TRY(t.value(field)), family, key));
  } else if (tok == "iifname" || (tok == "meta" && !t.done() && t.peek() == "iifname")) {
    if (tok == "meta") t.next();
    m.kind = Match::Kind::Iifname;
    negation();
    std::string name = PLUMB_TRY(t.value("iifname"));
    if (name.size() >= 2 && name.front() == '"' && name.back() == '"') name = name.substr(1, name.size() - 2);
    if (!name.empty() && name.back() == '*') name.back() = '+';
    m.name = PLUMB_TRY(ifname_of(name, key));
  } else if (tok == "meta" && !t.done() && t.peek() == "l4proto") {
    t.next();
    m.kind = Match::Kind::L4proto;
    negation();
    m.l4proto = PLUMB_TRY(l4proto_of(PLUMB_TRY(t.value("l4proto")), key));
  } else if (tok == "fib") {
    const std::string which = PLUMB_TRY(t.value(tok));
    if ((which != "saddr" && which != "daddr") || t.done() || t.peek() != "type") return t.unsupported("fib " + which);
    t.next();
    m.kind = which == "daddr" ? Match::Kind::FibDaddrType : Match::Kind::FibSaddrType;
    negation();
    m.rtn_type = PLUMB_TRY(rtn_of(PLUMB_TRY(t.value("type")), key));
  } else {
    return t.unsupported(tok);
  }
  out.push_back(m);
  return {};
}

void fib_match(nftnl_rule* r, const Match& m) {
  nftnl_expr* fib = expr::make("fib");
  nftnl_expr_set_u32(fib, NFTNL_EXPR_FIB_FLAGS, m.kind == Match::Kind::FibDaddrType ? NFTA_FIB_F_DADDR : NFTA_FIB_F_SADDR);
  nftnl_expr_set_u32(fib, NFTNL_EXPR_FIB_RESULT, NFT_FIB_RESULT_ADDRTYPE);
  nftnl_expr_set_u32(fib, NFTNL_EXPR_FIB_DREG, NFT_REG_1);
  nftnl_rule_add_expr(r, fib);
  expr::cmp(r, m.negate ? NFT_CMP_NEQ : NFT_CMP_EQ, &m.rtn_type, 4);
}

}  // namespace

std::string Conditions::class_name() const {
  if (matches.empty()) return {};
  char buf[16];
  std::snprintf(buf, sizeof buf, "c%08x", text::fnv1a32(std::to_string(family) + " " + text));
  return buf;
}

std::string conditions_syntax(const std::vector<std::string>& tokens) {
  if (tokens.empty() || tokens[0].empty()) return {};
  const char c = text::trim(tokens[0]).empty() ? ' ' : text::trim(tokens[0]).front();
  return c == '-' || c == '!' ? "iptables" : "nftables";
}

Result<Conditions> parse_conditions(const std::vector<std::string>& tokens, int family, const std::string& key) {
  Conditions c;
  c.family = family;
  const bool iptables = conditions_syntax(tokens) == "iptables";
  Tokens t(tokens, key, !iptables);
  c.text = t.joined();
  while (!t.done()) {
    if (iptables) {
      bool negate = t.peek() == "!";
      if (negate) t.next();
      if (t.done()) return fail(cni_code::kInvalidConfig, key + ": \"!\" at the end");
      PLUMB_TRY(iptables_match(t, family, negate, c.matches));
    } else {
      PLUMB_TRY(nftables_match(t, family, c.matches));
    }
  }
  return c;
}

void append_conditions(nftnl_rule* r, const Conditions& c) {
  for (const Match& m : c.matches) {
    switch (m.kind) {
      case Match::Kind::Saddr:
      case Match::Kind::Daddr:
        expr::addr_match(r, c.family, m.kind == Match::Kind::Saddr, m.prefix, m.negate);
        break;
      case Match::Kind::Iifname:
        expr::ifname_match(r, true, m.name, m.negate);
        break;
      case Match::Kind::L4proto:
        expr::meta(r, NFT_META_L4PROTO, NFT_REG_1);
        expr::cmp(r, m.negate ? NFT_CMP_NEQ : NFT_CMP_EQ, &m.l4proto, 1);
        break;
      case Match::Kind::FibSaddrType:
      case Match::Kind::FibDaddrType:
        fib_match(r, m);
        break;
    }
  }
}

}  // namespace plumb::nft
