/*
 * smroute OpenSM plugin: the plain-C boundary between the OpenSM side
 * (smroute_plugin.c, which includes OpenSM's C headers) and the gRPC client
 * (smroute_client.cc, C++).  No OpenSM or gRPC type crosses it.
 *
 * The client reads its configuration (smroute_client_new), sends one
 * subnet snapshot per routing pass to the daemon's RouteSubnet RPC and
 * checks the answer's shape (smroute_route), and answers the lookups of
 * the answer's virtual lanes (smroute_path_sl, smroute_sl2vl).  Every function reports a
 * failure as a sentence in err (NUL-terminated, at most errlen bytes).
 */
#ifndef SMROUTE_CLIENT_H
#define SMROUTE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SMR_ERR_LEN 1024
#define SMR_DESC_LEN 64 /* an IB NodeDescription */

/* One node the subnet manager discovered; its addressed ports are
 * ports[first_port .. first_port + n_ports - 1] of the snapshot. */
struct smr_node {
	uint64_t guid;
	uint64_t sysimg_guid;
	uint8_t type;      /* IB NodeType: 1 CA, 2 switch, 3 router */
	uint8_t num_ports; /* external ports */
	char desc[SMR_DESC_LEN + 1]; /* printable ASCII, NUL-terminated */
	uint32_t first_port;
	uint32_t n_ports;
	uint8_t sl2vl;     /* a switch with SL-to-VL tables (port 0's CapabilityMask) */
};

/* A port with a LID or GUID: a switch's port 0, a CA's or router's port. */
struct smr_port {
	uint64_t guid;
	uint16_t lid; /* base LID, 0 = none */
	uint8_t num;
	uint8_t lmc;
};

/* One cable, listed once; each end's PortInfo VLCap and OperationalVLs
 * (VL codes: 1 VL0 .. 5 VL0-14). */
struct smr_link {
	uint64_t guid_a;
	uint64_t guid_b;
	uint8_t port_a;
	uint8_t port_b;
	uint8_t vl_cap_a, op_vls_a;
	uint8_t vl_cap_b, op_vls_b;
};

struct smr_subnet {
	const struct smr_node *nodes;
	size_t n_nodes;
	const struct smr_port *ports;
	size_t n_ports;
	const struct smr_link *links;
	size_t n_links;
	uint8_t lmc;
	const char *sm; /* who asks, e.g. "OpenSM 3.3.23" */
	/* the VL facts: OpenSM's qos and max_op_vls (the plugin answers path_sl
	 * and programs SL-to-VL tables: it says so in every request) */
	uint8_t qos;
	uint8_t max_op_vls;
};

/* The virtual lanes of an epoch routed with detours (proto message Lanes),
 * checked for shape.  vls <= 1: no detours, nothing else set.
 *
 * path_sl(slid, dlid): paths[path_of_lid[dlid]].sl if that entry is >= 0 and
 * the path is from_all or slid lies in one of its source ranges
 * src[first .. first + n - 1] (ascending, disjoint), else 0.
 * SL-to-VL of (switch guid, in port, out port): the table with that in port,
 * else the table with SMR_ANY_IN, else VL 0 for every SL; tables ascending
 * by (guid, out_port, in_port), each (guid, out_port, in_port) once. */
#define SMR_ANY_IN 0xffff

struct smr_lid_range {
	uint16_t first, last; /* inclusive */
};

struct smr_path_sl {
	uint8_t sl;       /* 1..15 */
	uint8_t from_all; /* from every source LID */
	uint32_t first;   /* else its source ranges in smr_lanes.src */
	uint32_t n;
};

struct smr_sl2vl {
	uint64_t guid;    /* the switch */
	uint16_t in_port; /* or SMR_ANY_IN */
	uint8_t out_port;
	uint8_t top_vl;   /* the highest VL of vl[] */
	uint8_t vl[16];   /* VL of SL 0..15, each < vls */
};

struct smr_lanes {
	uint32_t vls, sls, escape_sl;
	uint32_t max_lid;     /* path_of_lid has max_lid + 1 entries */
	int32_t *path_of_lid; /* per DLID: index into paths, -1 = SL 0 */
	struct smr_path_sl *paths;
	size_t n_paths;
	struct smr_lid_range *src;
	size_t n_src;
	struct smr_sl2vl *tables;
	size_t n_tables;
};

/* The daemon's answer, checked for shape: n_switches switches in strictly
 * ascending GUID order, each with max_lid + 1 LFT bytes and n_switches hop
 * bytes (least switch-to-switch hops to switch k of this order, 255 =
 * unreachable).  Arrays are malloc'ed; smroute_answer_free releases them. */
struct smr_answer {
	uint64_t epoch;
	int committed; /* 0: the daemon's serving epoch was already this subnet's */
	char mode[32]; /* routing mode ("tree", "tree+turns", "updown") */
	uint32_t max_lid;
	size_t n_switches;
	uint64_t *guids; /* n_switches */
	uint16_t *lids;  /* n_switches: each switch's LID in the daemon's epoch */
	uint8_t *lft;    /* n_switches * (max_lid + 1) */
	uint8_t *hops;   /* n_switches * n_switches */
	double seconds;  /* the call, as the plugin saw it */
	struct smr_lanes lanes; /* vls 1 unless the epoch routes detours over VLs */
};

struct smr_client;

/* Read the configuration: the file named by SMROUTE_PLUGIN_CONFIG (key=value
 * lines: address, deadline_ms, tls_ca, tls_cert, tls_key), then
 * SMROUTE_DAEMON (the address; overrides the file).  NULL and err on a bad
 * configuration. */
struct smr_client *smroute_client_new(char *err, size_t errlen);
void smroute_client_free(struct smr_client *c);
/* "address (deadline N ms, TLS ...)" for the log. */
const char *smroute_client_describe(const struct smr_client *c);

/* One RouteSubnet round trip.  0 with *ans filled, or -1 with err saying why
 * (daemon unreachable, deadline passed, refused epoch, malformed answer). */
int smroute_route(struct smr_client *c, const struct smr_subnet *s,
		  struct smr_answer *ans, char *err, size_t errlen);
void smroute_answer_free(struct smr_answer *ans);

/* The SL of the path slid -> dlid (rules above); hint when lanes->vls <= 1. */
uint8_t smroute_path_sl(const struct smr_lanes *lanes, uint16_t slid, uint16_t dlid,
			uint8_t hint);
/* The SL-to-VL table of (switch guid, in port, out port): NULL = VL 0 for
 * every SL. */
const struct smr_sl2vl *smroute_sl2vl(const struct smr_lanes *lanes, uint64_t guid,
				      unsigned in_port, unsigned out_port);
void smroute_lanes_free(struct smr_lanes *lanes);

#ifdef __cplusplus
}
#endif
#endif /* SMROUTE_CLIENT_H */
