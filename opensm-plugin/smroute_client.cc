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
const char kDefaultAddress[] = "127.0.0.1:50051";
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
  req->mutable_nodes()->Reserve(static_cast<int>(s->n_nodes));
  for (size_t i = 0; i < s->n_nodes; i++) {
    const smr_node &n = s->nodes[i];
    pb::SubnetNode *m = req->add_nodes();
    m->set_guid(n.guid);
    m->set_type(n.type);
    m->set_num_ports(n.num_ports);
    m->set_description(n.desc);
    m->set_sysimg_guid(n.sysimg_guid);
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
  }
}

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
  std::memset(ans, 0, sizeof *ans);
}

}  // extern "C"
