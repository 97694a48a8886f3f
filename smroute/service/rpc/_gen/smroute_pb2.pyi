from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LiveSource(_message.Message):
    __slots__ = ("ca", "port", "timeout_s")
    CA_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    ca: str
    port: int
    timeout_s: float
    def __init__(self, ca: _Optional[str] = ..., port: _Optional[int] = ..., timeout_s: _Optional[float] = ...) -> None: ...

class LoadFabricRequest(_message.Message):
    __slots__ = ("topology_text", "path", "live", "source_name")
    TOPOLOGY_TEXT_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    LIVE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    topology_text: str
    path: str
    live: LiveSource
    source_name: str
    def __init__(self, topology_text: _Optional[str] = ..., path: _Optional[str] = ..., live: _Optional[_Union[LiveSource, _Mapping]] = ..., source_name: _Optional[str] = ...) -> None: ...

class FabricSummary(_message.Message):
    __slots__ = ("content_hash", "switches", "cas", "routers", "links", "max_lid", "source")
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    SWITCHES_FIELD_NUMBER: _ClassVar[int]
    CAS_FIELD_NUMBER: _ClassVar[int]
    ROUTERS_FIELD_NUMBER: _ClassVar[int]
    LINKS_FIELD_NUMBER: _ClassVar[int]
    MAX_LID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    content_hash: str
    switches: int
    cas: int
    routers: int
    links: int
    max_lid: int
    source: str
    def __init__(self, content_hash: _Optional[str] = ..., switches: _Optional[int] = ..., cas: _Optional[int] = ..., routers: _Optional[int] = ..., links: _Optional[int] = ..., max_lid: _Optional[int] = ..., source: _Optional[str] = ...) -> None: ...

class LoadFabricResponse(_message.Message):
    __slots__ = ("fabric",)
    FABRIC_FIELD_NUMBER: _ClassVar[int]
    fabric: FabricSummary
    def __init__(self, fabric: _Optional[_Union[FabricSummary, _Mapping]] = ...) -> None: ...

class Validation(_message.Message):
    __slots__ = ("state", "ok", "pairs", "delivered", "dead_ends", "loops", "updown_violations", "non_minimal", "ca_pairs_unroutable", "summary", "failures")
    class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        STATE_UNSPECIFIED: _ClassVar[Validation.State]
        PENDING: _ClassVar[Validation.State]
        DONE: _ClassVar[Validation.State]
        SKIPPED: _ClassVar[Validation.State]
    STATE_UNSPECIFIED: Validation.State
    PENDING: Validation.State
    DONE: Validation.State
    SKIPPED: Validation.State
    STATE_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    PAIRS_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    DEAD_ENDS_FIELD_NUMBER: _ClassVar[int]
    LOOPS_FIELD_NUMBER: _ClassVar[int]
    UPDOWN_VIOLATIONS_FIELD_NUMBER: _ClassVar[int]
    NON_MINIMAL_FIELD_NUMBER: _ClassVar[int]
    CA_PAIRS_UNROUTABLE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    state: Validation.State
    ok: bool
    pairs: int
    delivered: int
    dead_ends: int
    loops: int
    updown_violations: int
    non_minimal: int
    ca_pairs_unroutable: int
    summary: str
    failures: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, state: _Optional[_Union[Validation.State, str]] = ..., ok: _Optional[bool] = ..., pairs: _Optional[int] = ..., delivered: _Optional[int] = ..., dead_ends: _Optional[int] = ..., loops: _Optional[int] = ..., updown_violations: _Optional[int] = ..., non_minimal: _Optional[int] = ..., ca_pairs_unroutable: _Optional[int] = ..., summary: _Optional[str] = ..., failures: _Optional[_Iterable[str]] = ...) -> None: ...

class DiffSummary(_message.Message):
    __slots__ = ("identical", "switches_compared", "switches_changed", "entries_changed", "lids_changed", "blocks_changed", "switches_only_a", "switches_only_b")
    IDENTICAL_FIELD_NUMBER: _ClassVar[int]
    SWITCHES_COMPARED_FIELD_NUMBER: _ClassVar[int]
    SWITCHES_CHANGED_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_CHANGED_FIELD_NUMBER: _ClassVar[int]
    LIDS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    BLOCKS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    SWITCHES_ONLY_A_FIELD_NUMBER: _ClassVar[int]
    SWITCHES_ONLY_B_FIELD_NUMBER: _ClassVar[int]
    identical: bool
    switches_compared: int
    switches_changed: int
    entries_changed: int
    lids_changed: int
    blocks_changed: int
    switches_only_a: int
    switches_only_b: int
    def __init__(self, identical: _Optional[bool] = ..., switches_compared: _Optional[int] = ..., switches_changed: _Optional[int] = ..., entries_changed: _Optional[int] = ..., lids_changed: _Optional[int] = ..., blocks_changed: _Optional[int] = ..., switches_only_a: _Optional[int] = ..., switches_only_b: _Optional[int] = ...) -> None: ...

class FaultEvent(_message.Message):
    __slots__ = ("kind", "node_guid", "port")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[FaultEvent.Kind]
        LINK_DOWN: _ClassVar[FaultEvent.Kind]
        LINK_UP: _ClassVar[FaultEvent.Kind]
        SWITCH_DOWN: _ClassVar[FaultEvent.Kind]
        SWITCH_UP: _ClassVar[FaultEvent.Kind]
        CA_DOWN: _ClassVar[FaultEvent.Kind]
        CA_UP: _ClassVar[FaultEvent.Kind]
    KIND_UNSPECIFIED: FaultEvent.Kind
    LINK_DOWN: FaultEvent.Kind
    LINK_UP: FaultEvent.Kind
    SWITCH_DOWN: FaultEvent.Kind
    SWITCH_UP: FaultEvent.Kind
    CA_DOWN: FaultEvent.Kind
    CA_UP: FaultEvent.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    NODE_GUID_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    kind: FaultEvent.Kind
    node_guid: int
    port: int
    def __init__(self, kind: _Optional[_Union[FaultEvent.Kind, str]] = ..., node_guid: _Optional[int] = ..., port: _Optional[int] = ...) -> None: ...

class Epoch(_message.Message):
    __slots__ = ("id", "parent_id", "cause", "fabric_hash", "base_fabric_hash", "algorithm", "lmc", "switches", "max_lid", "tables_sha256", "committed_unix_s", "timings", "faults", "down_links", "down_switches", "down_cas", "validation", "diff_from_parent", "routing_mode", "routing_mode_reason", "turn_lids", "instance_id", "down_items", "resumed", "vls", "sls", "max_vls", "max_vls_reason")
    class TimingsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    FABRIC_HASH_FIELD_NUMBER: _ClassVar[int]
    BASE_FABRIC_HASH_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    LMC_FIELD_NUMBER: _ClassVar[int]
    SWITCHES_FIELD_NUMBER: _ClassVar[int]
    MAX_LID_FIELD_NUMBER: _ClassVar[int]
    TABLES_SHA256_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    FAULTS_FIELD_NUMBER: _ClassVar[int]
    DOWN_LINKS_FIELD_NUMBER: _ClassVar[int]
    DOWN_SWITCHES_FIELD_NUMBER: _ClassVar[int]
    DOWN_CAS_FIELD_NUMBER: _ClassVar[int]
    VALIDATION_FIELD_NUMBER: _ClassVar[int]
    DIFF_FROM_PARENT_FIELD_NUMBER: _ClassVar[int]
    ROUTING_MODE_FIELD_NUMBER: _ClassVar[int]
    ROUTING_MODE_REASON_FIELD_NUMBER: _ClassVar[int]
    TURN_LIDS_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    DOWN_ITEMS_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    VLS_FIELD_NUMBER: _ClassVar[int]
    SLS_FIELD_NUMBER: _ClassVar[int]
    MAX_VLS_FIELD_NUMBER: _ClassVar[int]
    MAX_VLS_REASON_FIELD_NUMBER: _ClassVar[int]
    id: int
    parent_id: int
    cause: str
    fabric_hash: str
    base_fabric_hash: str
    algorithm: str
    lmc: int
    switches: int
    max_lid: int
    tables_sha256: str
    committed_unix_s: float
    timings: _containers.ScalarMap[str, float]
    faults: _containers.RepeatedCompositeFieldContainer[FaultEvent]
    down_links: int
    down_switches: int
    down_cas: int
    validation: Validation
    diff_from_parent: DiffSummary
    routing_mode: str
    routing_mode_reason: str
    turn_lids: int
    instance_id: str
    down_items: _containers.RepeatedCompositeFieldContainer[FaultEvent]
    resumed: bool
    vls: int
    sls: int
    max_vls: int
    max_vls_reason: str
    def __init__(self, id: _Optional[int] = ..., parent_id: _Optional[int] = ..., cause: _Optional[str] = ..., fabric_hash: _Optional[str] = ..., base_fabric_hash: _Optional[str] = ..., algorithm: _Optional[str] = ..., lmc: _Optional[int] = ..., switches: _Optional[int] = ..., max_lid: _Optional[int] = ..., tables_sha256: _Optional[str] = ..., committed_unix_s: _Optional[float] = ..., timings: _Optional[_Mapping[str, float]] = ..., faults: _Optional[_Iterable[_Union[FaultEvent, _Mapping]]] = ..., down_links: _Optional[int] = ..., down_switches: _Optional[int] = ..., down_cas: _Optional[int] = ..., validation: _Optional[_Union[Validation, _Mapping]] = ..., diff_from_parent: _Optional[_Union[DiffSummary, _Mapping]] = ..., routing_mode: _Optional[str] = ..., routing_mode_reason: _Optional[str] = ..., turn_lids: _Optional[int] = ..., instance_id: _Optional[str] = ..., down_items: _Optional[_Iterable[_Union[FaultEvent, _Mapping]]] = ..., resumed: _Optional[bool] = ..., vls: _Optional[int] = ..., sls: _Optional[int] = ..., max_vls: _Optional[int] = ..., max_vls_reason: _Optional[str] = ...) -> None: ...

class GetEpochRequest(_message.Message):
    __slots__ = ("epoch", "include_down_items")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_DOWN_ITEMS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    include_down_items: bool
    def __init__(self, epoch: _Optional[int] = ..., include_down_items: _Optional[bool] = ...) -> None: ...

class RouteRequest(_message.Message):
    __slots__ = ("algorithm", "lmc", "wait_validation", "confirm_state_loss")
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    LMC_FIELD_NUMBER: _ClassVar[int]
    WAIT_VALIDATION_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_STATE_LOSS_FIELD_NUMBER: _ClassVar[int]
    algorithm: str
    lmc: int
    wait_validation: bool
    confirm_state_loss: bool
    def __init__(self, algorithm: _Optional[str] = ..., lmc: _Optional[int] = ..., wait_validation: _Optional[bool] = ..., confirm_state_loss: _Optional[bool] = ...) -> None: ...

class RouteResponse(_message.Message):
    __slots__ = ("epoch",)
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    epoch: Epoch
    def __init__(self, epoch: _Optional[_Union[Epoch, _Mapping]] = ...) -> None: ...

class GetTablesRequest(_message.Message):
    __slots__ = ("epoch", "switch_guids", "since_epoch", "since_instance")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SWITCH_GUIDS_FIELD_NUMBER: _ClassVar[int]
    SINCE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SINCE_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    switch_guids: _containers.RepeatedScalarFieldContainer[int]
    since_epoch: int
    since_instance: str
    def __init__(self, epoch: _Optional[int] = ..., switch_guids: _Optional[_Iterable[int]] = ..., since_epoch: _Optional[int] = ..., since_instance: _Optional[str] = ...) -> None: ...

class LftBlock(_message.Message):
    __slots__ = ("index", "ports")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    index: int
    ports: bytes
    def __init__(self, index: _Optional[int] = ..., ports: _Optional[bytes] = ...) -> None: ...

class SwitchTable(_message.Message):
    __slots__ = ("guid", "lid", "desc", "blocks", "removed")
    GUID_FIELD_NUMBER: _ClassVar[int]
    LID_FIELD_NUMBER: _ClassVar[int]
    DESC_FIELD_NUMBER: _ClassVar[int]
    BLOCKS_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    guid: int
    lid: int
    desc: str
    blocks: _containers.RepeatedCompositeFieldContainer[LftBlock]
    removed: bool
    def __init__(self, guid: _Optional[int] = ..., lid: _Optional[int] = ..., desc: _Optional[str] = ..., blocks: _Optional[_Iterable[_Union[LftBlock, _Mapping]]] = ..., removed: _Optional[bool] = ...) -> None: ...

class TablesHeader(_message.Message):
    __slots__ = ("epoch", "since_epoch", "max_lid", "switches", "tables_sha256", "instance_id")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SINCE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_LID_FIELD_NUMBER: _ClassVar[int]
    SWITCHES_FIELD_NUMBER: _ClassVar[int]
    TABLES_SHA256_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    since_epoch: int
    max_lid: int
    switches: int
    tables_sha256: str
    instance_id: str
    def __init__(self, epoch: _Optional[int] = ..., since_epoch: _Optional[int] = ..., max_lid: _Optional[int] = ..., switches: _Optional[int] = ..., tables_sha256: _Optional[str] = ..., instance_id: _Optional[str] = ...) -> None: ...

class GetTablesResponse(_message.Message):
    __slots__ = ("header", "switch")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SWITCH_FIELD_NUMBER: _ClassVar[int]
    header: TablesHeader
    switch: SwitchTable
    def __init__(self, header: _Optional[_Union[TablesHeader, _Mapping]] = ..., switch: _Optional[_Union[SwitchTable, _Mapping]] = ...) -> None: ...

class ApplyFaultsRequest(_message.Message):
    __slots__ = ("events", "dry_run", "max_entries")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[FaultEvent]
    dry_run: bool
    max_entries: int
    def __init__(self, events: _Optional[_Iterable[_Union[FaultEvent, _Mapping]]] = ..., dry_run: _Optional[bool] = ..., max_entries: _Optional[int] = ...) -> None: ...

class ApplyFaultsResponse(_message.Message):
    __slots__ = ("committed", "epoch", "diff", "coalesced_events", "changes", "truncated")
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    DIFF_FIELD_NUMBER: _ClassVar[int]
    COALESCED_EVENTS_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    committed: bool
    epoch: Epoch
    diff: DiffSummary
    coalesced_events: int
    changes: _containers.RepeatedCompositeFieldContainer[SwitchChange]
    truncated: bool
    def __init__(self, committed: _Optional[bool] = ..., epoch: _Optional[_Union[Epoch, _Mapping]] = ..., diff: _Optional[_Union[DiffSummary, _Mapping]] = ..., coalesced_events: _Optional[int] = ..., changes: _Optional[_Iterable[_Union[SwitchChange, _Mapping]]] = ..., truncated: _Optional[bool] = ...) -> None: ...

class DiffRequest(_message.Message):
    __slots__ = ("epoch_a", "epoch_b", "max_entries")
    EPOCH_A_FIELD_NUMBER: _ClassVar[int]
    EPOCH_B_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    epoch_a: int
    epoch_b: int
    max_entries: int
    def __init__(self, epoch_a: _Optional[int] = ..., epoch_b: _Optional[int] = ..., max_entries: _Optional[int] = ...) -> None: ...

class EntryChange(_message.Message):
    __slots__ = ("lid", "old_port", "new_port")
    LID_FIELD_NUMBER: _ClassVar[int]
    OLD_PORT_FIELD_NUMBER: _ClassVar[int]
    NEW_PORT_FIELD_NUMBER: _ClassVar[int]
    lid: int
    old_port: int
    new_port: int
    def __init__(self, lid: _Optional[int] = ..., old_port: _Optional[int] = ..., new_port: _Optional[int] = ...) -> None: ...

class SwitchChange(_message.Message):
    __slots__ = ("guid", "desc", "old_lid", "new_lid", "lids_changed", "blocks", "changes")
    GUID_FIELD_NUMBER: _ClassVar[int]
    DESC_FIELD_NUMBER: _ClassVar[int]
    OLD_LID_FIELD_NUMBER: _ClassVar[int]
    NEW_LID_FIELD_NUMBER: _ClassVar[int]
    LIDS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    BLOCKS_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    guid: int
    desc: str
    old_lid: int
    new_lid: int
    lids_changed: int
    blocks: _containers.RepeatedScalarFieldContainer[int]
    changes: _containers.RepeatedCompositeFieldContainer[EntryChange]
    def __init__(self, guid: _Optional[int] = ..., desc: _Optional[str] = ..., old_lid: _Optional[int] = ..., new_lid: _Optional[int] = ..., lids_changed: _Optional[int] = ..., blocks: _Optional[_Iterable[int]] = ..., changes: _Optional[_Iterable[_Union[EntryChange, _Mapping]]] = ...) -> None: ...

class DiffResponse(_message.Message):
    __slots__ = ("epoch_a", "epoch_b", "summary", "switches", "truncated")
    EPOCH_A_FIELD_NUMBER: _ClassVar[int]
    EPOCH_B_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    SWITCHES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    epoch_a: int
    epoch_b: int
    summary: DiffSummary
    switches: _containers.RepeatedCompositeFieldContainer[SwitchChange]
    truncated: bool
    def __init__(self, epoch_a: _Optional[int] = ..., epoch_b: _Optional[int] = ..., summary: _Optional[_Union[DiffSummary, _Mapping]] = ..., switches: _Optional[_Iterable[_Union[SwitchChange, _Mapping]]] = ..., truncated: _Optional[bool] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AnalyzeRequest(_message.Message):
    __slots__ = ("epoch", "order", "seed", "rp_samples")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    RP_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    order: str
    seed: int
    rp_samples: int
    def __init__(self, epoch: _Optional[int] = ..., order: _Optional[str] = ..., seed: _Optional[int] = ..., rp_samples: _Optional[int] = ...) -> None: ...

class AnalyzeResponse(_message.Message):
    __slots__ = ("epoch", "end_ports", "a2a_risk", "rp_risk_median", "sp_risk_max", "sp_hsd_avg", "sp_hsd_max", "unroutable_a2a", "unroutable_rp", "unroutable_sp", "seconds", "order")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    END_PORTS_FIELD_NUMBER: _ClassVar[int]
    A2A_RISK_FIELD_NUMBER: _ClassVar[int]
    RP_RISK_MEDIAN_FIELD_NUMBER: _ClassVar[int]
    SP_RISK_MAX_FIELD_NUMBER: _ClassVar[int]
    SP_HSD_AVG_FIELD_NUMBER: _ClassVar[int]
    SP_HSD_MAX_FIELD_NUMBER: _ClassVar[int]
    UNROUTABLE_A2A_FIELD_NUMBER: _ClassVar[int]
    UNROUTABLE_RP_FIELD_NUMBER: _ClassVar[int]
    UNROUTABLE_SP_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    end_ports: int
    a2a_risk: int
    rp_risk_median: float
    sp_risk_max: int
    sp_hsd_avg: float
    sp_hsd_max: int
    unroutable_a2a: int
    unroutable_rp: int
    unroutable_sp: int
    seconds: float
    order: str
    def __init__(self, epoch: _Optional[int] = ..., end_ports: _Optional[int] = ..., a2a_risk: _Optional[int] = ..., rp_risk_median: _Optional[float] = ..., sp_risk_max: _Optional[int] = ..., sp_hsd_avg: _Optional[float] = ..., sp_hsd_max: _Optional[int] = ..., unroutable_a2a: _Optional[int] = ..., unroutable_rp: _Optional[int] = ..., unroutable_sp: _Optional[int] = ..., seconds: _Optional[float] = ..., order: _Optional[str] = ...) -> None: ...

class SelectLidsRequest(_message.Message):
    __slots__ = ("epoch", "hosts", "pattern", "per_stage")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    PER_STAGE_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    hosts: _containers.RepeatedScalarFieldContainer[str]
    pattern: str
    per_stage: bool
    def __init__(self, epoch: _Optional[int] = ..., hosts: _Optional[_Iterable[str]] = ..., pattern: _Optional[str] = ..., per_stage: _Optional[bool] = ...) -> None: ...

class Stage(_message.Message):
    __slots__ = ("index", "max_flows")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    MAX_FLOWS_FIELD_NUMBER: _ClassVar[int]
    index: int
    max_flows: int
    def __init__(self, index: _Optional[int] = ..., max_flows: _Optional[int] = ...) -> None: ...

class SelectLidsResponse(_message.Message):
    __slots__ = ("epoch", "lmc", "n_ranks", "dlids", "stages", "hsd_avg", "hsd_max", "hsd_base_avg", "hsd_base_max")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LMC_FIELD_NUMBER: _ClassVar[int]
    N_RANKS_FIELD_NUMBER: _ClassVar[int]
    DLIDS_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    HSD_AVG_FIELD_NUMBER: _ClassVar[int]
    HSD_MAX_FIELD_NUMBER: _ClassVar[int]
    HSD_BASE_AVG_FIELD_NUMBER: _ClassVar[int]
    HSD_BASE_MAX_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    lmc: int
    n_ranks: int
    dlids: _containers.RepeatedScalarFieldContainer[int]
    stages: _containers.RepeatedCompositeFieldContainer[Stage]
    hsd_avg: float
    hsd_max: float
    hsd_base_avg: float
    hsd_base_max: float
    def __init__(self, epoch: _Optional[int] = ..., lmc: _Optional[int] = ..., n_ranks: _Optional[int] = ..., dlids: _Optional[_Iterable[int]] = ..., stages: _Optional[_Iterable[_Union[Stage, _Mapping]]] = ..., hsd_avg: _Optional[float] = ..., hsd_max: _Optional[float] = ..., hsd_base_avg: _Optional[float] = ..., hsd_base_max: _Optional[float] = ...) -> None: ...

class SubnetPort(_message.Message):
    __slots__ = ("num", "guid", "lid", "lmc")
    NUM_FIELD_NUMBER: _ClassVar[int]
    GUID_FIELD_NUMBER: _ClassVar[int]
    LID_FIELD_NUMBER: _ClassVar[int]
    LMC_FIELD_NUMBER: _ClassVar[int]
    num: int
    guid: int
    lid: int
    lmc: int
    def __init__(self, num: _Optional[int] = ..., guid: _Optional[int] = ..., lid: _Optional[int] = ..., lmc: _Optional[int] = ...) -> None: ...

class SubnetNode(_message.Message):
    __slots__ = ("guid", "type", "num_ports", "description", "sysimg_guid", "ports", "sl2vl")
    GUID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NUM_PORTS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SYSIMG_GUID_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    SL2VL_FIELD_NUMBER: _ClassVar[int]
    guid: int
    type: int
    num_ports: int
    description: str
    sysimg_guid: int
    ports: _containers.RepeatedCompositeFieldContainer[SubnetPort]
    sl2vl: bool
    def __init__(self, guid: _Optional[int] = ..., type: _Optional[int] = ..., num_ports: _Optional[int] = ..., description: _Optional[str] = ..., sysimg_guid: _Optional[int] = ..., ports: _Optional[_Iterable[_Union[SubnetPort, _Mapping]]] = ..., sl2vl: _Optional[bool] = ...) -> None: ...

class SubnetLink(_message.Message):
    __slots__ = ("guid_a", "port_a", "guid_b", "port_b", "vl_cap_a", "op_vls_a", "vl_cap_b", "op_vls_b")
    GUID_A_FIELD_NUMBER: _ClassVar[int]
    PORT_A_FIELD_NUMBER: _ClassVar[int]
    GUID_B_FIELD_NUMBER: _ClassVar[int]
    PORT_B_FIELD_NUMBER: _ClassVar[int]
    VL_CAP_A_FIELD_NUMBER: _ClassVar[int]
    OP_VLS_A_FIELD_NUMBER: _ClassVar[int]
    VL_CAP_B_FIELD_NUMBER: _ClassVar[int]
    OP_VLS_B_FIELD_NUMBER: _ClassVar[int]
    guid_a: int
    port_a: int
    guid_b: int
    port_b: int
    vl_cap_a: int
    op_vls_a: int
    vl_cap_b: int
    op_vls_b: int
    def __init__(self, guid_a: _Optional[int] = ..., port_a: _Optional[int] = ..., guid_b: _Optional[int] = ..., port_b: _Optional[int] = ..., vl_cap_a: _Optional[int] = ..., op_vls_a: _Optional[int] = ..., vl_cap_b: _Optional[int] = ..., op_vls_b: _Optional[int] = ...) -> None: ...

class RouteSubnetRequest(_message.Message):
    __slots__ = ("nodes", "links", "lmc", "sm", "want_hops", "programs_lanes", "qos", "max_op_vls")
    NODES_FIELD_NUMBER: _ClassVar[int]
    LINKS_FIELD_NUMBER: _ClassVar[int]
    LMC_FIELD_NUMBER: _ClassVar[int]
    SM_FIELD_NUMBER: _ClassVar[int]
    WANT_HOPS_FIELD_NUMBER: _ClassVar[int]
    PROGRAMS_LANES_FIELD_NUMBER: _ClassVar[int]
    QOS_FIELD_NUMBER: _ClassVar[int]
    MAX_OP_VLS_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[SubnetNode]
    links: _containers.RepeatedCompositeFieldContainer[SubnetLink]
    lmc: int
    sm: str
    want_hops: bool
    programs_lanes: bool
    qos: bool
    max_op_vls: int
    def __init__(self, nodes: _Optional[_Iterable[_Union[SubnetNode, _Mapping]]] = ..., links: _Optional[_Iterable[_Union[SubnetLink, _Mapping]]] = ..., lmc: _Optional[int] = ..., sm: _Optional[str] = ..., want_hops: _Optional[bool] = ..., programs_lanes: _Optional[bool] = ..., qos: _Optional[bool] = ..., max_op_vls: _Optional[int] = ...) -> None: ...

class SubnetRoutes(_message.Message):
    __slots__ = ("guid", "lid", "lft", "hops")
    GUID_FIELD_NUMBER: _ClassVar[int]
    LID_FIELD_NUMBER: _ClassVar[int]
    LFT_FIELD_NUMBER: _ClassVar[int]
    HOPS_FIELD_NUMBER: _ClassVar[int]
    guid: int
    lid: int
    lft: bytes
    hops: bytes
    def __init__(self, guid: _Optional[int] = ..., lid: _Optional[int] = ..., lft: _Optional[bytes] = ..., hops: _Optional[bytes] = ...) -> None: ...

class RouteSubnetResponse(_message.Message):
    __slots__ = ("epoch", "committed", "max_lid", "switches", "lanes")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    MAX_LID_FIELD_NUMBER: _ClassVar[int]
    SWITCHES_FIELD_NUMBER: _ClassVar[int]
    LANES_FIELD_NUMBER: _ClassVar[int]
    epoch: Epoch
    committed: bool
    max_lid: int
    switches: _containers.RepeatedCompositeFieldContainer[SubnetRoutes]
    lanes: Lanes
    def __init__(self, epoch: _Optional[_Union[Epoch, _Mapping]] = ..., committed: _Optional[bool] = ..., max_lid: _Optional[int] = ..., switches: _Optional[_Iterable[_Union[SubnetRoutes, _Mapping]]] = ..., lanes: _Optional[_Union[Lanes, _Mapping]] = ...) -> None: ...

class GetLanesRequest(_message.Message):
    __slots__ = ("epoch",)
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    def __init__(self, epoch: _Optional[int] = ...) -> None: ...

class PathSl(_message.Message):
    __slots__ = ("sl", "target_guid", "dlid_ranges", "from_all", "from_lid_ranges", "from_switches")
    SL_FIELD_NUMBER: _ClassVar[int]
    TARGET_GUID_FIELD_NUMBER: _ClassVar[int]
    DLID_RANGES_FIELD_NUMBER: _ClassVar[int]
    FROM_ALL_FIELD_NUMBER: _ClassVar[int]
    FROM_LID_RANGES_FIELD_NUMBER: _ClassVar[int]
    FROM_SWITCHES_FIELD_NUMBER: _ClassVar[int]
    sl: int
    target_guid: int
    dlid_ranges: _containers.RepeatedScalarFieldContainer[int]
    from_all: bool
    from_lid_ranges: _containers.RepeatedScalarFieldContainer[int]
    from_switches: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, sl: _Optional[int] = ..., target_guid: _Optional[int] = ..., dlid_ranges: _Optional[_Iterable[int]] = ..., from_all: _Optional[bool] = ..., from_lid_ranges: _Optional[_Iterable[int]] = ..., from_switches: _Optional[_Iterable[int]] = ...) -> None: ...

class Sl2VlTable(_message.Message):
    __slots__ = ("guid", "out_port", "any_in_port", "in_port", "vl")
    GUID_FIELD_NUMBER: _ClassVar[int]
    OUT_PORT_FIELD_NUMBER: _ClassVar[int]
    ANY_IN_PORT_FIELD_NUMBER: _ClassVar[int]
    IN_PORT_FIELD_NUMBER: _ClassVar[int]
    VL_FIELD_NUMBER: _ClassVar[int]
    guid: int
    out_port: int
    any_in_port: bool
    in_port: int
    vl: bytes
    def __init__(self, guid: _Optional[int] = ..., out_port: _Optional[int] = ..., any_in_port: _Optional[bool] = ..., in_port: _Optional[int] = ..., vl: _Optional[bytes] = ...) -> None: ...

class Lanes(_message.Message):
    __slots__ = ("epoch", "vls", "sls", "escape_sl", "paths", "tables")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    VLS_FIELD_NUMBER: _ClassVar[int]
    SLS_FIELD_NUMBER: _ClassVar[int]
    ESCAPE_SL_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    vls: int
    sls: int
    escape_sl: int
    paths: _containers.RepeatedCompositeFieldContainer[PathSl]
    tables: _containers.RepeatedCompositeFieldContainer[Sl2VlTable]
    def __init__(self, epoch: _Optional[int] = ..., vls: _Optional[int] = ..., sls: _Optional[int] = ..., escape_sl: _Optional[int] = ..., paths: _Optional[_Iterable[_Union[PathSl, _Mapping]]] = ..., tables: _Optional[_Iterable[_Union[Sl2VlTable, _Mapping]]] = ...) -> None: ...
