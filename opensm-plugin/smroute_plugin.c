/*
 * smroute as an OpenSM routing engine (OpenSM >= 3.3.23's external routing
 * engine API; "event_plugin_name smroute" + "routing_engine smroute,updn").
 *
 * The event plugin's construct() registers a routing engine named
 * "smroute".  On each routing pass:
 *
 *   build_lid_matrices      snapshot of OpenSM's subnet (nodes, addressed
 *                           ports with LIDs, cables, LMC) -> the daemon's
 *                           RouteSubnet RPC (smroute_client.cc) -> the
 *                           answer checked against OpenSM's subnet; then
 *                           OpenSM's min-hop tables filled from the answer's
 *                           switch-to-switch hop counts and 0 returned, so
 *                           OpenSM skips its own min-hop computation while
 *                           the SA and multicast routing read correct counts;
 *   ucast_build_fwd_tables  each switch's new_lft from the answer (OpenSM
 *                           then writes only the 64-LID blocks that differ
 *                           from what the switch holds);
 *   path_sl, update_sl2vl   set only while the epoch routes detours over
 *                           virtual lanes (the answer's Lanes, kept from the
 *                           last successful pass): the SA's PathRecord SL and
 *                           the SL-to-VL tables OpenSM's QoS manager programs
 *                           after routing (only with "qos TRUE").  Without
 *                           lanes they are unset: OpenSM's own SLs and
 *                           (optimized) SL-to-VL programming, as before.
 *
 * Failure is safe: daemon unreachable, deadline passed, an epoch that failed
 * validation, an answer that does not fit this subnet (switch count, a GUID,
 * a port out of range, a LID beyond OpenSM's top LID, malformed lanes), or
 * lanes OpenSM cannot program (check_vls: qos off, too few VLs on a port
 * that needs them; ERR SMR06): nothing is filled,
 * the reason goes to OpenSM's log (ERR level) and build_lid_matrices returns
 * -1, so OpenSM routes with the next engine of routing_engine.  The next
 * pass asks the daemon again.
 *
 * All routing is the daemon's; this file only translates OpenSM's structures.
 */

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include <opensm/osm_config.h>
#include <complib/cl_qmap.h>
#include <opensm/osm_version.h>
#include <opensm/osm_opensm.h>
#include <opensm/osm_log.h>
#include <opensm/osm_node.h>
#include <opensm/osm_port.h>
#include <opensm/osm_switch.h>
#include <opensm/osm_event_plugin.h>

#include "smroute_client.h"

#if OSM_EVENT_PLUGIN_INTERFACE_VER != 2
#error OpenSM event plugin interface version mismatch
#endif

#define ENGINE_NAME "smroute"

struct smr_plugin {
	osm_opensm_t *osm;
	struct smr_client *client; /* NULL: configuration error */
	char config_error[SMR_ERR_LEN];
	struct smr_answer answer;
	int have_answer;
	/* per OpenSM switch of the pass (sw_guid_tbl order): its answer row */
	size_t *row_of;
	/* the lanes of the last successful pass (vls 1: none); read by the SA's
	 * threads under OpenSM's lock, replaced while routing holds it */
	struct smr_lanes lanes;
	osm_routing_engine_t *engine; /* ours, to set or unset path_sl, update_sl2vl */
	unsigned passes, failures;
};

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* ------------------------------------------------------------ snapshot */

struct snapshot {
	struct smr_node *nodes;
	struct smr_port *ports;
	struct smr_link *links;
	size_t n_nodes, n_ports, n_links;
};

static void snapshot_free(struct snapshot *s)
{
	free(s->nodes);
	free(s->ports);
	free(s->links);
	memset(s, 0, sizeof(*s));
}

static void copy_desc(char *dst, const osm_node_t *node)
{
	const char *d = (const char *)node->node_desc.description;
	int i;

	for (i = 0; i < SMR_DESC_LEN && d[i]; i++)
		dst[i] = (d[i] >= 0x20 && d[i] < 0x7f) ? d[i] : '?';
	dst[i] = '\0';
}

/* OpenSM's subnet as the client's arrays; -1 if out of memory. */
static int take_snapshot(osm_subn_t *subn, struct snapshot *s)
{
	cl_qmap_t *tbl = &subn->node_guid_tbl;
	cl_map_item_t *item;
	size_t max_nodes = cl_qmap_count(tbl), max_ports = 0;

	for (item = cl_qmap_head(tbl); item != cl_qmap_end(tbl); item = cl_qmap_next(item))
		max_ports += ((osm_node_t *)item)->physp_tbl_size;
	s->nodes = calloc(max_nodes ? max_nodes : 1, sizeof(*s->nodes));
	s->ports = calloc(max_ports ? max_ports : 1, sizeof(*s->ports));
	s->links = calloc(max_ports ? max_ports : 1, sizeof(*s->links));
	if (!s->nodes || !s->ports || !s->links)
		return -1;

	for (item = cl_qmap_head(tbl); item != cl_qmap_end(tbl); item = cl_qmap_next(item)) {
		osm_node_t *node = (osm_node_t *)item;
		struct smr_node *n = &s->nodes[s->n_nodes++];
		uint64_t guid = cl_ntoh64(osm_node_get_node_guid(node));
		uint32_t i;

		n->guid = guid;
		n->sysimg_guid = cl_ntoh64(node->node_info.sys_guid);
		n->type = osm_node_get_type(node);
		n->num_ports = node->node_info.num_ports;
		copy_desc(n->desc, node);
		n->first_port = (uint32_t)s->n_ports;
		if (n->type == IB_NODE_TYPE_SWITCH) {
			osm_physp_t *p0 = osm_node_get_physp_ptr(node, 0);

			n->sl2vl = p0 && (p0->port_info.capability_mask & IB_PORT_CAP_HAS_SL_MAP);
		}
		for (i = 0; i < node->physp_tbl_size; i++) {
			osm_physp_t *p = osm_node_get_physp_ptr(node, i);
			osm_physp_t *r;
			osm_port_t *port;
			uint16_t lo, hi;

			if (!p)
				continue;
			/* an addressed port: an end port OpenSM knows by its GUID */
			port = osm_get_port_by_guid(subn, osm_physp_get_port_guid(p));
			if (port && port->p_physp == p) {
				struct smr_port *sp = &s->ports[s->n_ports++];
				uint8_t lmc = 0;

				osm_port_get_lid_range_ho(port, &lo, &hi);
				while (lo && lmc < 7 && (1u << lmc) < (unsigned)(hi - lo + 1))
					lmc++;
				sp->guid = cl_ntoh64(port->guid);
				sp->lid = lo;
				sp->num = (uint8_t)i;
				sp->lmc = lmc;
				n->n_ports++;
			}
			r = i ? osm_physp_get_remote(p) : NULL;
			if (r && r->p_node) {
				uint64_t rguid = cl_ntoh64(osm_node_get_node_guid(r->p_node));

				/* each cable once: from its lower (GUID, port) end */
				if (guid < rguid || (guid == rguid && i < r->port_num)) {
					struct smr_link *l = &s->links[s->n_links++];

					l->guid_a = guid;
					l->port_a = (uint8_t)i;
					l->guid_b = rguid;
					l->port_b = r->port_num;
					l->vl_cap_a = ib_port_info_get_vl_cap(&p->port_info);
					l->op_vls_a = ib_port_info_get_op_vls(&p->port_info);
					l->vl_cap_b = ib_port_info_get_vl_cap(&r->port_info);
					l->op_vls_b = ib_port_info_get_op_vls(&r->port_info);
				}
			}
		}
	}
	return 0;
}

/* ------------------------------------------------------------ the answer */

static ssize_t answer_row(const struct smr_answer *a, uint64_t guid)
{
	size_t lo = 0, hi = a->n_switches;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (a->guids[mid] < guid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo < a->n_switches && a->guids[lo] == guid) ? (ssize_t)lo : -1;
}

/* Does the answer fit OpenSM's subnet?  Fills p->row_of; 0 or -1 with err. */
static int check_answer(struct smr_plugin *p, const struct smr_answer *a, char *err,
			size_t errlen)
{
	cl_qmap_t *tbl = &p->osm->subn.sw_guid_tbl;
	size_t n = cl_qmap_count(tbl), k = 0, width = (size_t)a->max_lid + 1;
	cl_map_item_t *item;

	if (a->n_switches != n) {
		snprintf(err, errlen, "the answer has %zu switches, OpenSM's subnet %zu",
			 a->n_switches, n);
		return -1;
	}
	free(p->row_of);
	p->row_of = calloc(n ? n : 1, sizeof(*p->row_of));
	if (!p->row_of) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (item = cl_qmap_head(tbl); item != cl_qmap_end(tbl); item = cl_qmap_next(item), k++) {
		osm_switch_t *sw = (osm_switch_t *)item;
		uint64_t guid = cl_ntoh64(osm_node_get_node_guid(sw->p_node));
		uint16_t lid = cl_ntoh16(osm_node_get_base_lid(sw->p_node, 0));
		ssize_t r = answer_row(a, guid);
		const uint8_t *row;
		size_t l;

		if (r < 0) {
			snprintf(err, errlen, "switch 0x%016" PRIx64 " is not in the answer", guid);
			return -1;
		}
		if (a->max_lid > sw->max_lid_ho || !sw->new_lft) {
			snprintf(err, errlen, "the answer routes LIDs up to %u, beyond OpenSM's "
				 "top LID %u", a->max_lid, sw->max_lid_ho);
			return -1;
		}
		if (a->lids[r] != lid) {
			snprintf(err, errlen, "switch 0x%016" PRIx64 " has LID %u, the answer says "
				 "%u", guid, lid, a->lids[r]);
			return -1;
		}
		row = a->lft + (size_t)r * width;
		for (l = 0; l < width; l++) {
			if (row[l] != OSM_NO_PATH && row[l] >= sw->num_ports) {
				snprintf(err, errlen, "switch 0x%016" PRIx64 " (%u ports): LID %zu "
					 "to port %u, out of range", guid, sw->num_ports - 1, l,
					 row[l]);
				return -1;
			}
		}
		if (lid && lid <= a->max_lid && row[lid] != 0) {
			snprintf(err, errlen, "switch 0x%016" PRIx64 ": its own LID %u goes to port "
				 "%u, not 0", guid, lid, row[lid]);
			return -1;
		}
		p->row_of[k] = (size_t)r;
	}
	return 0;
}

/* Data VLs of a VLCap / OperationalVLs / max_op_vls code (1: VL0 .. 5: VL0-14). */
static unsigned data_vls(unsigned code)
{
	static const unsigned n[] = { 1, 1, 2, 4, 8, 15 }; /* 0: OpenSM takes VL0 */

	return code < sizeof(n) / sizeof(n[0]) ? n[code] : 1;
}

/* Do the answer's SL-to-VL tables fit OpenSM's switches?  0 or -1 with err. */
static int check_lane_ports(struct smr_plugin *p, const struct smr_lanes *L, char *err,
			    size_t errlen)
{
	size_t k;

	for (k = 0; k < L->n_tables; k++) {
		const struct smr_sl2vl *t = &L->tables[k];
		osm_switch_t *sw = osm_get_switch_by_guid(&p->osm->subn, cl_hton64(t->guid));

		if (!sw) {
			snprintf(err, errlen, "SL-to-VL table of switch 0x%016" PRIx64 ", which "
				 "is not in OpenSM's subnet", t->guid);
			return -1;
		}
		if (t->out_port >= sw->num_ports ||
		    (t->in_port != SMR_ANY_IN && t->in_port >= sw->num_ports)) {
			snprintf(err, errlen, "SL-to-VL table of switch 0x%016" PRIx64 " (in port "
				 "%u, out port %u) does not fit its %u ports", t->guid, t->in_port,
				 t->out_port, sw->num_ports - 1);
			return -1;
		}
	}
	return 0;
}

/* Can OpenSM program the lanes?  It sets SL-to-VL tables only with qos TRUE
 * (osm_qos_setup, after routing), masks each table's VLs with the port's
 * OperationalVLs, and sets OperationalVLs to the least VLCap of the link's
 * two ends and max_op_vls.  So every switch port a table sends on VL v > 0
 * needs v + 1 data VLs by all four, and its switch the SL-to-VL capability.
 * 0, or -1 with err. */
static int check_vls(struct smr_plugin *p, const struct smr_lanes *L, char *err, size_t errlen)
{
	osm_subn_t *subn = &p->osm->subn;
	unsigned cap = data_vls(subn->opt.max_op_vls);
	size_t k;

	if (!subn->opt.qos) {
		snprintf(err, errlen, "the epoch routes detours over %u VLs but OpenSM's qos is "
			 "FALSE, so OpenSM programs no SL-to-VL tables (set qos TRUE in "
			 "opensm.conf, or max_vls 1 in the daemon)", L->vls);
		return -1;
	}
	if (cap < L->vls) {
		snprintf(err, errlen, "the epoch routes detours over %u VLs but OpenSM's "
			 "max_op_vls %u allows %u data VLs", L->vls, subn->opt.max_op_vls, cap);
		return -1;
	}
	for (k = 0; k < L->n_tables; k++) {
		const struct smr_sl2vl *t = &L->tables[k];
		osm_switch_t *sw = osm_get_switch_by_guid(subn, cl_hton64(t->guid));
		osm_physp_t *p0, *ph, *r;
		unsigned have;

		if (!t->top_vl)
			continue;
		p0 = osm_node_get_physp_ptr(sw->p_node, 0);
		ph = osm_node_get_physp_ptr(sw->p_node, t->out_port);
		r = ph ? osm_physp_get_remote(ph) : NULL;
		if (!p0 || !(p0->port_info.capability_mask & IB_PORT_CAP_HAS_SL_MAP)) {
			snprintf(err, errlen, "the epoch needs VL %u out of switch 0x%016" PRIx64
				 " port %u but the switch has no SL-to-VL tables (PortInfo "
				 "CapabilityMask)", t->top_vl, t->guid, t->out_port);
			return -1;
		}
		if (!r) {
			snprintf(err, errlen, "the epoch needs VL %u out of switch 0x%016" PRIx64
				 " port %u, which has no cable", t->top_vl, t->guid, t->out_port);
			return -1;
		}
		have = data_vls(ib_port_info_get_vl_cap(&ph->port_info));
		if (data_vls(ib_port_info_get_vl_cap(&r->port_info)) < have)
			have = data_vls(ib_port_info_get_vl_cap(&r->port_info));
		if (data_vls(ib_port_info_get_op_vls(&ph->port_info)) < have)
			have = data_vls(ib_port_info_get_op_vls(&ph->port_info));
		if (cap < have)
			have = cap;
		if (have <= t->top_vl) {
			snprintf(err, errlen, "the epoch needs VL %u out of switch 0x%016" PRIx64
				 " port %u but OpenSM can use %u data VLs there (VLCap %u, peer "
				 "VLCap %u, OperationalVLs %u, max_op_vls %u)", t->top_vl, t->guid,
				 t->out_port, have, ib_port_info_get_vl_cap(&ph->port_info),
				 ib_port_info_get_vl_cap(&r->port_info),
				 ib_port_info_get_op_vls(&ph->port_info), subn->opt.max_op_vls);
			return -1;
		}
	}
	return 0;
}

/* OpenSM's min-hop tables (switch LIDs only, as OpenSM keeps them): per
 * switch and target switch, the least hops at port 0 and through each port
 * that leads to a switch (1 + that switch's least hops). */
static void fill_hops(struct smr_plugin *p, const struct smr_answer *a)
{
	cl_qmap_t *tbl = &p->osm->subn.sw_guid_tbl;
	size_t n = a->n_switches, k = 0, t;
	uint16_t *tlid = calloc(n ? n : 1, sizeof(*tlid));
	ssize_t *remote = calloc(256, sizeof(*remote));
	cl_map_item_t *item;

	if (!tlid || !remote)
		goto out;
	for (t = 0; t < n; t++)
		tlid[t] = a->lids[t];
	for (item = cl_qmap_head(tbl); item != cl_qmap_end(tbl); item = cl_qmap_next(item), k++) {
		osm_switch_t *sw = (osm_switch_t *)item;
		const uint8_t *own = a->hops + p->row_of[k] * n;
		unsigned port;

		for (port = 1; port < sw->num_ports; port++) {
			osm_physp_t *ph = osm_node_get_physp_ptr(sw->p_node, port);
			osm_physp_t *r = ph ? osm_physp_get_remote(ph) : NULL;

			remote[port] = -1;
			if (r && r->p_node && r->p_node->sw && r->p_node != sw->p_node &&
			    osm_link_is_healthy(ph))
				remote[port] = answer_row(a, cl_ntoh64(osm_node_get_node_guid(r->p_node)));
		}
		for (t = 0; t < n; t++) {
			uint8_t *row;

			if (!tlid[t] || own[t] == OSM_NO_PATH ||
			    osm_switch_set_hops(sw, tlid[t], 0, own[t]))
				continue;
			row = sw->hops[tlid[t]]; /* allocated by osm_switch_set_hops */
			for (port = 1; port < sw->num_ports; port++) {
				uint8_t h;

				if (remote[port] < 0)
					continue;
				h = a->hops[(size_t)remote[port] * n + t];
				if (h < OSM_NO_PATH - 1)
					row[port] = h + 1;
			}
		}
	}
out:
	free(tlid);
	free(remote);
}

/* ------------------------------------------------------------ the engine */

static uint8_t smr_path_sl(void *context, uint8_t hint, const ib_net16_t slid,
			   const ib_net16_t dlid);
static void smr_update_sl2vl(void *context, osm_physp_t *port, uint8_t in_port,
			     uint8_t out_port, ib_slvl_table_t *t);

/* The lanes hooks are set while the kept lanes need VLs (OpenSM reads them
 * at each use; we change them while routing holds OpenSM's lock). */
static void set_lane_hooks(struct smr_plugin *p)
{
	int on = p->lanes.vls > 1;

	if (!p->engine)
		return;
	p->engine->path_sl = on ? smr_path_sl : NULL;
	p->engine->update_sl2vl = on ? smr_update_sl2vl : NULL;
}

static int smr_build_lid_matrices(void *context)
{
	struct smr_plugin *p = context;
	osm_subn_t *subn = &p->osm->subn;
	struct snapshot snap;
	struct smr_subnet req;
	char err[SMR_ERR_LEN] = "";
	double t0 = now_s(), t1;
	int rc;

	p->passes++;
	if (p->have_answer) {
		smroute_answer_free(&p->answer);
		p->have_answer = 0;
	}
	smroute_lanes_free(&p->lanes); /* a failed pass keeps none */
	set_lane_hooks(p);
	if (!p->client) {
		p->failures++;
		OSM_LOG(&p->osm->log, OSM_LOG_ERROR, "ERR SMR01: smroute: not configured: %s; "
			"falling back to the next routing engine\n", p->config_error);
		return -1;
	}
	memset(&snap, 0, sizeof(snap));
	if (take_snapshot(subn, &snap)) {
		snapshot_free(&snap);
		p->failures++;
		OSM_LOG(&p->osm->log, OSM_LOG_ERROR, "ERR SMR02: smroute: out of memory for the "
			"subnet snapshot; falling back to the next routing engine\n");
		return -1;
	}
	req.nodes = snap.nodes;
	req.n_nodes = snap.n_nodes;
	req.ports = snap.ports;
	req.n_ports = snap.n_ports;
	req.links = snap.links;
	req.n_links = snap.n_links;
	req.lmc = subn->opt.lmc;
	req.sm = OSM_VERSION;
	req.qos = subn->opt.qos ? 1 : 0;
	req.max_op_vls = subn->opt.max_op_vls;
	t1 = now_s();
	rc = smroute_route(p->client, &req, &p->answer, err, sizeof(err));
	snapshot_free(&snap);
	if (rc == 0 && (check_answer(p, &p->answer, err, sizeof(err)) != 0 ||
			check_lane_ports(p, &p->answer.lanes, err, sizeof(err)) != 0)) {
		smroute_answer_free(&p->answer);
		rc = -1;
	}
	if (rc) {
		p->failures++;
		OSM_LOG(&p->osm->log, OSM_LOG_ERROR, "ERR SMR03: smroute: %s; nothing filled, "
			"falling back to the next routing engine\n", err);
		return -1;
	}
	if (p->answer.lanes.vls > 1 && check_vls(p, &p->answer.lanes, err, sizeof(err))) {
		p->failures++;
		OSM_LOG(&p->osm->log, OSM_LOG_ERROR, "ERR SMR06: smroute: epoch %" PRIu64 ": %s; "
			"OpenSM cannot program these virtual lanes: nothing filled, falling back "
			"to the next routing engine\n", p->answer.epoch, err);
		smroute_answer_free(&p->answer);
		return -1;
	}
	p->have_answer = 1;
	p->lanes = p->answer.lanes; /* kept for path_sl and update_sl2vl */
	memset(&p->answer.lanes, 0, sizeof(p->answer.lanes));
	set_lane_hooks(p);
	if (p->lanes.vls > 1)
		OSM_LOG(&p->osm->log, OSM_LOG_INFO, "smroute: epoch %" PRIu64 " routes detours "
			"over %u VLs: %u SLs (escape SL %u), %zu path SLs, %zu SL-to-VL tables\n",
			p->answer.epoch, p->lanes.vls, p->lanes.sls, p->lanes.escape_sl,
			p->lanes.n_paths, p->lanes.n_tables);
	fill_hops(p, &p->answer);
	OSM_LOG(&p->osm->log, OSM_LOG_INFO, "smroute: epoch %" PRIu64 " (%s, %s) for %zu "
		"nodes, %zu cables: snapshot %.3f s, daemon %.3f s, hop tables %.3f s\n",
		p->answer.epoch, p->answer.committed ? "new" : "unchanged", p->answer.mode,
		req.n_nodes, req.n_links, t1 - t0, p->answer.seconds,
		now_s() - t1 - p->answer.seconds);
	return 0;
}

static int smr_ucast_build_fwd_tables(void *context)
{
	struct smr_plugin *p = context;
	cl_qmap_t *tbl = &p->osm->subn.sw_guid_tbl;
	size_t k = 0, width;
	cl_map_item_t *item;

	if (!p->have_answer) {
		OSM_LOG(&p->osm->log, OSM_LOG_ERROR, "ERR SMR04: smroute: no answer for this "
			"pass; falling back to the next routing engine\n");
		return -1;
	}
	width = (size_t)p->answer.max_lid + 1;
	for (item = cl_qmap_head(tbl); item != cl_qmap_end(tbl); item = cl_qmap_next(item), k++) {
		osm_switch_t *sw = (osm_switch_t *)item;

		/* the rest of new_lft stays OSM_NO_PATH (osm_switch_prepare_path_rebuild) */
		memcpy(sw->new_lft, p->answer.lft + p->row_of[k] * width, width);
	}
	OSM_LOG(&p->osm->log, OSM_LOG_VERBOSE, "smroute: epoch %" PRIu64 " in the new LFTs of "
		"%zu switches\n", p->answer.epoch, k);
	smroute_answer_free(&p->answer);
	p->have_answer = 0;
	return 0;
}

/* The SA's PathRecord SL (and the SM's SL, slid -> SM LID). */
static uint8_t smr_path_sl(void *context, uint8_t hint, const ib_net16_t slid,
			   const ib_net16_t dlid)
{
	struct smr_plugin *p = context;

	return smroute_path_sl(&p->lanes, cl_ntoh16(slid), cl_ntoh16(dlid), hint);
}

/* The SL-to-VL table of port (a switch's out_port, or an end-port) for
 * packets in by in_port: the epoch's, or VL 0 for every SL; without lanes
 * OpenSM's own (its QoS configuration's). */
static void smr_update_sl2vl(void *context, osm_physp_t *port, uint8_t in_port,
			     uint8_t out_port, ib_slvl_table_t *t)
{
	struct smr_plugin *p = context;
	const struct smr_sl2vl *tbl = NULL;
	unsigned i;

	if (p->lanes.vls <= 1)
		return;
	if (port->p_node && osm_node_get_type(port->p_node) == IB_NODE_TYPE_SWITCH)
		tbl = smroute_sl2vl(&p->lanes, cl_ntoh64(osm_node_get_node_guid(port->p_node)),
				    in_port, out_port);
	for (i = 0; i < 8; i++)
		t->raw_vl_by_sl[i] = tbl ? (uint8_t)(tbl->vl[2 * i] << 4 | tbl->vl[2 * i + 1]) : 0;
}

static void smr_engine_destroy(void *context)
{
	struct smr_plugin *p = context;

	if (p && p->have_answer) {
		smroute_answer_free(&p->answer);
		p->have_answer = 0;
	}
	if (p)
		smroute_lanes_free(&p->lanes);
}

static int smr_setup(osm_routing_engine_t *engine, osm_opensm_t *osm)
{
	struct smr_plugin *p = engine->context; /* OpenSM sets it before setup */

	if (p)
		p->engine = engine;
	engine->build_lid_matrices = smr_build_lid_matrices;
	engine->ucast_build_fwd_tables = smr_ucast_build_fwd_tables;
	engine->destroy = smr_engine_destroy;
	/* OpenSM's own LFT dump, VL arbitration and multicast code use what we
	 * filled; path_sl and update_sl2vl while an epoch has lanes */
	engine->path_sl = NULL;
	engine->update_sl2vl = NULL;
	engine->ucast_dump_tables = NULL;
	engine->update_vlarb = NULL;
	engine->mcast_build_stree = NULL;
	return 0;
}

/* ------------------------------------------------------------ the plugin */

static void *smr_construct(osm_opensm_t *osm)
{
	struct smr_plugin *p = calloc(1, sizeof(*p));
	external_routing_engine_module_t module = { ENGINE_NAME, smr_setup, NULL };
	char err[SMR_ERR_LEN] = "";

	if (!p)
		return NULL;
	p->osm = osm;
	p->lanes.vls = p->lanes.sls = 1;
	module.context = p;
	p->client = smroute_client_new(err, sizeof(err));
	if (!p->client) {
		snprintf(p->config_error, sizeof(p->config_error), "%s", err);
		OSM_LOG(&osm->log, OSM_LOG_ERROR, "ERR SMR00: smroute: bad configuration: %s; "
			"every pass will fall back to the next routing engine\n", err);
	}
	if (osm_register_external_routing_engine(osm, &module, p) != CL_SUCCESS) {
		OSM_LOG(&osm->log, OSM_LOG_ERROR, "ERR SMR05: smroute: cannot register the "
			"routing engine '%s'\n", ENGINE_NAME);
		smroute_client_free(p->client);
		free(p);
		return NULL;
	}
	OSM_LOG(&osm->log, OSM_LOG_INFO, "smroute: routing engine '%s' registered; daemon %s\n",
		ENGINE_NAME, smroute_client_describe(p->client));
	return p;
}

static void smr_delete(void *data)
{
	struct smr_plugin *p = data;

	if (!p)
		return;
	if (p->have_answer)
		smroute_answer_free(&p->answer);
	smroute_lanes_free(&p->lanes);
	smroute_client_free(p->client);
	free(p->row_of);
	free(p);
}

/* The symbol OpenSM looks up; osm_version must equal the running OpenSM's. */
osm_event_plugin_t osm_event_plugin = {
	OSM_VERSION,
	smr_construct,
	smr_delete,
	NULL,
};
