// smroute OpenSM plugin: the gRPC client of the daemon's RouteSubnet RPC
// (see smroute_client.h).  It only translates: the snapshot into a
// RouteSubnetRequest, the response into plain arrays after checking its
// shape.  Routing happens in the daemon.

#include "smroute_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "smroute/v1/smroute.grpc.pb.h"

namespace {

namespace pb = smroute::v1;

// The daemon's default listen address (smroute/service/settings.py).
const char kDefaultAddress[] = "unix:/run/smroute/smroute.sock";
const unsigned kDefaultDeadlineMs = 30000;
const unsigned kMaxDeadlineMs = 3600000;

void fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

void fail(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || !errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

std::string trim(const std::string &s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) a++;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) b--;
  return s.substr(a, b - a);
}

bool read_file(const std::string &path, std::string *out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

// "unix:/abs/path", "host:port" or "[v6]:port".
bool valid_address(const std::string &a) {
  if (a.rfind("unix:", 0) == 0) return a.size() > 6 && a[5] == '/';
  size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == a.size()) return false;
  for (size_t i = colon + 1; i < a.size(); i++)
    if (!std::isdigit(static_cast<unsigned char>(a[i]))) return false;
  return true;
}

const char *status_name(grpc::StatusCode code) {
  static const char *const names[] = {
      "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
      "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
      "UNAUTHENTICATED"};
  const int i = static_cast<int>(code);
  return i >= 0 && i < static_cast<int>(sizeof names / sizeof names[0]) ? names[i] : "?";
}

}  // namespace

struct smr_client {
  std::string address = kDefaultAddress;
  unsigned deadline_ms = kDefaultDeadlineMs;
  std::string tls_ca, tls_cert, tls_key;  // paths; any set: TLS
  std::string config;                     // the file read, if any
  std::string described;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Smroute::Stub> stub;

  bool tls() const { return !tls_ca.empty() || !tls_cert.empty() || !tls_key.empty(); }

  // A fresh channel (TLS files re-read: rotated certificates apply).
  bool connect(char *err, size_t errlen) {
    std::shared_ptr<grpc::ChannelCredentials> creds;
    if (tls()) {
      grpc::SslCredentialsOptions o;
      const std::pair<const std::string *, std::string *> files[] = {
          {&tls_ca, &o.pem_root_certs}, {&tls_cert, &o.pem_cert_chain},
          {&tls_key, &o.pem_private_key}};
      for (const auto &f : files) {
        if (!f.first->empty() && !read_file(*f.first, f.second)) {
          fail(err, errlen, "cannot read TLS file %s: %s", f.first->c_str(),
               std::strerror(errno));
          return false;
        }
      }
      creds = grpc::SslCredentials(o);
    } else {
      creds = grpc::InsecureChannelCredentials();
    }
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);  // the tables: tens of MB on large fabrics
    args.SetMaxSendMessageSize(-1);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    channel = grpc::CreateCustomChannel(address, creds, args);
    stub = pb::Smroute::NewStub(channel);
    return true;
  }

  void disconnect() {
    stub.reset();
    channel.reset();
  }
};

namespace {

bool parse_config(smr_client *c, const std::string &path, char *err, size_t errlen) {
  std::ifstream in(path);
  if (!in) {
    fail(err, errlen, "SMROUTE_PLUGIN_CONFIG=%s: cannot open: %s", path.c_str(),
         std::strerror(errno));
    return false;
  }
  std::string line;
  for (int n = 1; std::getline(in, line); n++) {
    std::string s = trim(line.substr(0, line.find('#')));
    if (s.empty()) continue;
    size_t eq = s.find('=');
    if (eq == std::string::npos) {
      fail(err, errlen, "%s:%d: expected key=value, got \"%.80s\"", path.c_str(), n,
           s.c_str());
      return false;
    }
    std::string key = trim(s.substr(0, eq)), value = trim(s.substr(eq + 1));
    if (key == "address") {
      c->address = value;
    } else if (key == "deadline_ms") {
      char *end = nullptr;
      unsigned long v = std::strtoul(value.c_str(), &end, 10);
      if (value.empty() || *end || v < 1 || v > kMaxDeadlineMs) {
        fail(err, errlen, "%s:%d: deadline_ms \"%.40s\": expected milliseconds 1..%u",
             path.c_str(), n, value.c_str(), kMaxDeadlineMs);
        return false;
      }
      c->deadline_ms = static_cast<unsigned>(v);
    } else if (key == "tls_ca") {
      c->tls_ca = value;
    } else if (key == "tls_cert") {
      c->tls_cert = value;
    } else if (key == "tls_key") {
      c->tls_key = value;
    } else {
      fail(err, errlen,
           "%s:%d: unknown key \"%.40s\"; expected address, deadline_ms, tls_ca, "
           "tls_cert or tls_key",
           path.c_str(), n, key.c_str());
      return false;
    }
  }
  return true;
}

void build_request(const smr_subnet *s, pb::RouteSubnetRequest *req) {
  req->set_lmc(s->lmc);
  req->set_sm(s->sm ? s->sm : "");
  req->set_want_hops(true);
  req->set_programs_lanes(true);  // path_sl and update_sl2vl (smroute_plugin.c)
  req->set_qos(s->qos != 0);
  req->set_max_op_vls(s->max_op_vls);
  req->mutable_nodes()->Reserve(static_cast<int>(s->n_nodes));
  for (size_t i = 0; i < s->n_nodes; i++) {
    const smr_node &n = s->nodes[i];
    pb::SubnetNode *m = req->add_nodes();
    m->set_guid(n.guid);
    m->set_type(n.type);
    m->set_num_ports(n.num_ports);
    m->set_description(n.desc);
    m->set_sysimg_guid(n.sysimg_guid);
    m->set_sl2vl(n.sl2vl != 0);
    for (uint32_t k = 0; k < n.n_ports; k++) {
      const smr_port &p = s->ports[n.first_port + k];
      pb::SubnetPort *mp = m->add_ports();
      mp->set_num(p.num);
      mp->set_guid(p.guid);
      mp->set_lid(p.lid);
      mp->set_lmc(p.lmc);
    }
  }
  req->mutable_links()->Reserve(static_cast<int>(s->n_links));
  for (size_t i = 0; i < s->n_links; i++) {
    const smr_link &l = s->links[i];
    pb::SubnetLink *m = req->add_links();
    m->set_guid_a(l.guid_a);
    m->set_port_a(l.port_a);
    m->set_guid_b(l.guid_b);
    m->set_port_b(l.port_b);
    m->set_vl_cap_a(l.vl_cap_a);
    m->set_op_vls_a(l.op_vls_a);
    m->set_vl_cap_b(l.vl_cap_b);
    m->set_op_vls_b(l.op_vls_b);
  }
}

bool take_lanes(const pb::RouteSubnetResponse &r, smr_answer *ans, char *err,
                size_t errlen);

// The response's shape; fills ans (arrays malloc'ed) or says what is wrong.
bool take_response(const pb::RouteSubnetResponse &r, smr_answer *ans, char *err,
                   size_t errlen) {
  const pb::Epoch &ep = r.epoch();
  if (ep.validation().state() != pb::Validation::DONE || !ep.validation().ok()) {
    fail(err, errlen, "epoch %llu is not validated as valid (%.200s)",
         static_cast<unsigned long long>(ep.id()), ep.validation().summary().c_str());
    return false;
  }
  const size_t n = static_cast<size_t>(r.switches_size());
  const uint32_t max_lid = r.max_lid();
  if (n == 0 || max_lid == 0 || max_lid > 0xBFFF) {
    fail(err, errlen, "malformed answer: %zu switches, max LID %u", n, max_lid);
    return false;
  }
  const size_t width = static_cast<size_t>(max_lid) + 1;
  ans->guids = static_cast<uint64_t *>(std::malloc(n * sizeof(uint64_t)));
  ans->lids = static_cast<uint16_t *>(std::malloc(n * sizeof(uint16_t)));
  ans->lft = static_cast<uint8_t *>(std::malloc(n * width));
  ans->hops = static_cast<uint8_t *>(std::malloc(n * n));
  if (!ans->guids || !ans->lids || !ans->lft || !ans->hops) {
    fail(err, errlen, "out of memory for the tables of %zu switches", n);
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    const pb::SubnetRoutes &sw = r.switches(static_cast<int>(i));
    if (i && sw.guid() <= ans->guids[i - 1]) {
      fail(err, errlen, "malformed answer: switch %zu (0x%016llx) is not in ascending GUID "
           "order", i, static_cast<unsigned long long>(sw.guid()));
      return false;
    }
    if (sw.lft().size() != width || sw.hops().size() != n || sw.lid() > max_lid) {
      fail(err, errlen, "malformed answer: switch 0x%016llx has %zu LFT bytes (expected "
           "%zu), %zu hop bytes (expected %zu), LID %u (max LID %u)",
           static_cast<unsigned long long>(sw.guid()), sw.lft().size(), width,
           sw.hops().size(), n, sw.lid(), max_lid);
      return false;
    }
    ans->guids[i] = sw.guid();
    ans->lids[i] = static_cast<uint16_t>(sw.lid());
    std::memcpy(ans->lft + i * width, sw.lft().data(), width);
    std::memcpy(ans->hops + i * n, sw.hops().data(), n);
  }
  ans->epoch = ep.id();
  ans->committed = r.committed() ? 1 : 0;
  std::snprintf(ans->mode, sizeof ans->mode, "%s", ep.routing_mode().c_str());
  ans->max_lid = max_lid;
  ans->n_switches = n;
  return take_lanes(r, ans, err, errlen);
}

bool sl2vl_less(const smr_sl2vl &a, const smr_sl2vl &b) {
  if (a.guid != b.guid) return a.guid < b.guid;
  if (a.out_port != b.out_port) return a.out_port < b.out_port;
  return a.in_port < b.in_port;
}

// Flat [first, last, ...] LID ranges: even count, 1 <= first <= last <= top
// and, if ascending, each after the previous one.
bool lid_ranges(const google::protobuf::RepeatedField<uint32_t> &v, uint32_t top,
                bool ascending, const char *what, size_t path, char *err, size_t errlen) {
  if (v.size() % 2) {
    fail(err, errlen, "malformed lanes: path SL %zu: %d %s values, expected pairs", path,
         v.size(), what);
    return false;
  }
  for (int k = 0; k < v.size(); k += 2) {
    const uint32_t a = v.Get(k), b = v.Get(k + 1);
    if (a < 1 || a > b || b > top || (ascending && k && a <= v.Get(k - 1))) {
      fail(err, errlen, "malformed lanes: path SL %zu: %s range %u-%u (expected LIDs "
           "1..%u%s)", path, what, a, b, top, ascending ? ", ascending, disjoint" : "");
      return false;
    }
  }
  return true;
}

// The answer's Lanes into ans->lanes (ans->guids already filled); vls 1 if
// the epoch has none.
bool take_lanes(const pb::RouteSubnetResponse &r, smr_answer *ans, char *err,
                size_t errlen) {
  smr_lanes &L = ans->lanes;
  L.vls = L.sls = 1;
  const pb::Lanes &m = r.lanes();
  if (!r.has_lanes() || (m.vls() <= 1 && !m.paths_size() && !m.tables_size())) return true;
  if (m.epoch() != r.epoch().id() || m.vls() < 2 || m.vls() > 15 || m.sls() < 2 ||
      m.sls() > 16 || m.escape_sl() >= m.sls()) {
    fail(err, errlen, "malformed lanes: epoch %llu (answer's %llu), %u VLs, %u SLs, escape "
         "SL %u (expected 2..15 VLs, 2..16 SLs)", static_cast<unsigned long long>(m.epoch()),
         static_cast<unsigned long long>(r.epoch().id()), m.vls(), m.sls(), m.escape_sl());
    return false;
  }
  const uint32_t top = ans->max_lid;
  size_t n_src = 0;
  for (const pb::PathSl &ps : m.paths()) n_src += static_cast<size_t>(ps.from_lid_ranges_size()) / 2;
  L.max_lid = top;
  L.path_of_lid = static_cast<int32_t *>(std::malloc((top + 1) * sizeof(int32_t)));
  L.paths = static_cast<smr_path_sl *>(std::calloc(m.paths_size() + 1, sizeof(smr_path_sl)));
  L.src = static_cast<smr_lid_range *>(std::calloc(n_src + 1, sizeof(smr_lid_range)));
  L.tables = static_cast<smr_sl2vl *>(std::calloc(m.tables_size() + 1, sizeof(smr_sl2vl)));
  if (!L.path_of_lid || !L.paths || !L.src || !L.tables) {
    fail(err, errlen, "out of memory for the lanes");
    return false;
  }
  std::fill(L.path_of_lid, L.path_of_lid + top + 1, -1);
  for (int i = 0; i < m.paths_size(); i++) {
    const pb::PathSl &ps = m.paths(i);
    const size_t at = static_cast<size_t>(i);
    if (ps.sl() < 1 || ps.sl() >= m.sls()) {
      fail(err, errlen, "malformed lanes: path SL %zu has SL %u (expected 1..%u)", at, ps.sl(),
           m.sls() - 1);
      return false;
    }
    if (!lid_ranges(ps.dlid_ranges(), top, false, "destination", at, err, errlen) ||
        (!ps.from_all() &&
         !lid_ranges(ps.from_lid_ranges(), top, true, "source", at, err, errlen)))
      return false;
    for (int k = 0; k < ps.dlid_ranges_size(); k += 2) {
      for (uint32_t lid = ps.dlid_ranges(k); lid <= ps.dlid_ranges(k + 1); lid++) {
        if (L.path_of_lid[lid] >= 0) {
          fail(err, errlen, "malformed lanes: LID %u is the destination of path SLs %d and "
               "%zu", lid, L.path_of_lid[lid], at);
          return false;
        }
        L.path_of_lid[lid] = i;
      }
    }
    smr_path_sl &p = L.paths[L.n_paths++];
    p.sl = static_cast<uint8_t>(ps.sl());
    p.from_all = ps.from_all() ? 1 : 0;
    p.first = static_cast<uint32_t>(L.n_src);
    if (!p.from_all) {
      for (int k = 0; k < ps.from_lid_ranges_size(); k += 2, L.n_src++) {
        L.src[L.n_src].first = static_cast<uint16_t>(ps.from_lid_ranges(k));
        L.src[L.n_src].last = static_cast<uint16_t>(ps.from_lid_ranges(k + 1));
      }
    }
    p.n = static_cast<uint32_t>(L.n_src) - p.first;
  }
  for (const pb::Sl2VlTable &t : m.tables()) {
    smr_sl2vl &o = L.tables[L.n_tables];
    const bool known = std::binary_search(ans->guids, ans->guids + ans->n_switches, t.guid());
    if (!known || t.out_port() > 254 || (!t.any_in_port() && t.in_port() > 254) ||
        t.vl().size() != 16) {
      fail(err, errlen, "malformed lanes: SL-to-VL table of switch 0x%016llx%s, out port %u, "
           "in port %u, %zu VL bytes (expected a switch of the answer, ports 0..254, 16 "
           "bytes)", static_cast<unsigned long long>(t.guid()), known ? "" : " (unknown)",
           t.out_port(), t.in_port(), t.vl().size());
      return false;
    }
    o.guid = t.guid();
    o.out_port = static_cast<uint8_t>(t.out_port());
    o.in_port = t.any_in_port() ? SMR_ANY_IN : static_cast<uint16_t>(t.in_port());
    for (int sl = 0; sl < 16; sl++) {
      o.vl[sl] = static_cast<uint8_t>(t.vl()[sl]);
      if (o.vl[sl] >= m.vls()) {
        fail(err, errlen, "malformed lanes: switch 0x%016llx out port %u: SL %d to VL %u, "
             "beyond the epoch's %u VLs", static_cast<unsigned long long>(o.guid), o.out_port,
             sl, o.vl[sl], m.vls());
        return false;
      }
      o.top_vl = std::max(o.top_vl, o.vl[sl]);
    }
    L.n_tables++;
  }
  std::sort(L.tables, L.tables + L.n_tables, sl2vl_less);
  for (size_t k = 1; k < L.n_tables; k++) {
    if (!sl2vl_less(L.tables[k - 1], L.tables[k])) {
      fail(err, errlen, "malformed lanes: two SL-to-VL tables for switch 0x%016llx out port "
           "%u, in port %u", static_cast<unsigned long long>(L.tables[k].guid),
           L.tables[k].out_port, L.tables[k].in_port);
      return false;
    }
  }
  L.vls = m.vls();
  L.sls = m.sls();
  L.escape_sl = m.escape_sl();
  return true;
}

}  // namespace

extern "C" {

struct smr_client *smroute_client_new(char *err, size_t errlen) {
  auto c = std::make_unique<smr_client>();
  const char *cfg = std::getenv("SMROUTE_PLUGIN_CONFIG");
  if (cfg && *cfg) {
    c->config = cfg;
    if (!parse_config(c.get(), c->config, err, errlen)) return nullptr;
  }
  const char *addr = std::getenv("SMROUTE_DAEMON");
  if (addr && *addr) c->address = addr;
  if (!valid_address(c->address)) {
    fail(err, errlen, "daemon address \"%.200s\"%s: expected host:port, [ipv6]:port or "
         "unix:/absolute/path", c->address.c_str(),
         addr && *addr ? " (SMROUTE_DAEMON)" : "");
    return nullptr;
  }
  if (c->tls_cert.empty() != c->tls_key.empty()) {
    fail(err, errlen, "%s: tls_cert and tls_key go together (a client certificate and its "
         "key)", c->config.empty() ? "configuration" : c->config.c_str());
    return nullptr;
  }
  std::ostringstream d;
  d << c->address << " (deadline " << c->deadline_ms << " ms, "
    << (c->tls() ? (c->tls_cert.empty() ? "TLS" : "TLS with a client certificate")
                 : "plaintext")
    << (c->config.empty() ? "" : ", config " + c->config) << ")";
  c->described = d.str();
  return c.release();  // connects on the first pass (TLS files read then)
}

void smroute_client_free(struct smr_client *c) { delete c; }

const char *smroute_client_describe(const struct smr_client *c) {
  return c ? c->described.c_str() : "none (bad configuration)";
}

int smroute_route(struct smr_client *c, const struct smr_subnet *s, struct smr_answer *ans,
                  char *err, size_t errlen) {
  std::memset(ans, 0, sizeof *ans);
  auto t0 = std::chrono::steady_clock::now();
  if (!c->stub && !c->connect(err, errlen)) return -1;
  pb::RouteSubnetRequest req;
  build_request(s, &req);
  pb::RouteSubnetResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(c->deadline_ms));
  grpc::Status st = c->stub->RouteSubnet(&ctx, req, &resp);
  ans->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!st.ok()) {
    const char *why = st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
                          ? "deadline passed"
                      : st.error_code() == grpc::StatusCode::UNAVAILABLE ? "unreachable"
                                                                         : "refused";
    fail(err, errlen, "daemon %s %s after %.3f s (%s: %.600s)", c->address.c_str(), why,
         ans->seconds, status_name(st.error_code()), st.error_message().c_str());
    if (st.error_code() == grpc::StatusCode::UNAVAILABLE ||
        st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
      c->disconnect();  // the next pass connects afresh
    return -1;
  }
  if (!take_response(resp, ans, err, errlen)) {
    smroute_answer_free(ans);
    return -1;
  }
  return 0;
}

void smroute_answer_free(struct smr_answer *ans) {
  if (!ans) return;
  std::free(ans->guids);
  std::free(ans->lids);
  std::free(ans->lft);
  std::free(ans->hops);
  smroute_lanes_free(&ans->lanes);
  std::memset(ans, 0, sizeof *ans);
}

void smroute_lanes_free(struct smr_lanes *lanes) {
  if (!lanes) return;
  std::free(lanes->path_of_lid);
  std::free(lanes->paths);
  std::free(lanes->src);
  std::free(lanes->tables);
  std::memset(lanes, 0, sizeof *lanes);
  lanes->vls = lanes->sls = 1;
}

uint8_t smroute_path_sl(const struct smr_lanes *lanes, uint16_t slid, uint16_t dlid,
                        uint8_t hint) {
  if (lanes->vls <= 1) return hint;
  if (dlid > lanes->max_lid || lanes->path_of_lid[dlid] < 0) return 0;
  const smr_path_sl &p = lanes->paths[lanes->path_of_lid[dlid]];
  if (p.from_all) return p.sl;
  const smr_lid_range *b = lanes->src + p.first, *e = b + p.n;
  // the first range that starts after slid; slid is in the one before it
  const smr_lid_range *r = std::upper_bound(
      b, e, slid, [](uint16_t lid, const smr_lid_range &x) { return lid < x.first; });
  return (r != b && slid <= r[-1].last) ? p.sl : 0;
}

const struct smr_sl2vl *smroute_sl2vl(const struct smr_lanes *lanes, uint64_t guid,
                                      unsigned in_port, unsigned out_port) {
  if (lanes->vls <= 1 || in_port > 254 || out_port > 254) return nullptr;
  smr_sl2vl key{};
  key.guid = guid;
  key.out_port = static_cast<uint8_t>(out_port);
  const smr_sl2vl *b = lanes->tables, *e = b + lanes->n_tables;
  for (uint16_t in : {static_cast<uint16_t>(in_port), static_cast<uint16_t>(SMR_ANY_IN)}) {
    key.in_port = in;
    const smr_sl2vl *t = std::lower_bound(b, e, key, sl2vl_less);
    if (t != e && !sl2vl_less(key, *t)) return t;
  }
  return nullptr;
}

}  // extern "C"
