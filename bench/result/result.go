package result

import "time"

// Systems compared in one run.
const (
	SystemMemory    = "presenced-memory"   // presenced, in-memory store
	SystemRedis     = "presenced-redis"    // presenced, Redis store
	SystemMochi     = "mochi-bare"         // presenced with presence off: the bare mochi broker
	SystemMosquitto = "mosquitto-lastwill" // Debian's mosquitto 2.x with the classic retained online + last-will offline pattern
	SystemGroup     = "presenced-group"    // presenced, in-memory store, watched through a group topic (the team scenario)
)

// Scenarios.
const (
	ScenarioSteady = "steady"
	ScenarioChurn  = "churn"
	ScenarioStorm  = "storm"
	ScenarioSilent = "silent"
	ScenarioFanout = "fanout"
	ScenarioFlap   = "flap"
)

// File is one benchmark run: every system and scenario measured side by side.
type File struct {
	Started  time.Time `json:"started"`
	Duration float64   `json:"duration_s"`
	Command  string    `json:"command"` // how to reproduce
	Machine  Machine   `json:"machine"`
	// Presenced is the measured binary's --version line: its module
	// version and the commit it was built from ("(modified)" when the
	// tree had changes), so that every figure is tagged with its commit.
	Presenced string `json:"presenced,omitempty"`
	// Repeat is how many times every scenario ran against every system,
	// one round of all of them after the other, so that systems are side
	// by side in each round; reports give the median and the spread.
	Repeat int   `json:"repeat,omitempty"`
	Runs   []Run `json:"runs"`
	// Ceiling is the ceiling scenario's systems side by side, computed
	// from Runs when the file is written (bench/report.CeilingCompare);
	// absent without ceiling runs.
	Ceiling *CeilingCompare `json:"ceiling_compare,omitempty"`
}

// Machine describes where it ran.
type Machine struct {
	CPUs      int     `json:"cpus"`
	CPUModel  string  `json:"cpu_model"`
	MemoryGiB float64 `json:"memory_gib"`
	Kernel    string  `json:"kernel"`
	Go        string  `json:"go"`
	Mosquitto string  `json:"mosquitto,omitempty"` // version
	Redis     string  `json:"redis,omitempty"`     // version
}

// Run is one scenario against one system.
type Run struct {
	System   string             `json:"system"`
	Scenario string             `json:"scenario"`
	Round    int                `json:"round,omitempty"` // 1, 2, …: which round of a repeated run (0: not repeated)
	Params   map[string]any     `json:"params"`          // sizes: devices, keepalive_s, rate, observers, ...
	Metrics  Metrics            `json:"metrics"`
	Correct  Correctness        `json:"correctness"`
	Samples  []float64          `json:"latency_samples_ms,omitempty"` // for the plot; at most 2000, evenly thinned
	Error    string             `json:"error,omitempty"`              // the run failed: why
	Notes    []string           `json:"notes,omitempty"`
	Extra    map[string]float64 `json:"extra,omitempty"`
	Curve    []Point            `json:"curve,omitempty"` // ceiling: one point per offered rate tried, in the order tried
}

// Point is one step of a throughput search (the ceiling scenario): the rate
// offered, what was achieved and how fast changes propagated at it, and,
// after the load stopped, how long until every observer showed the truth.
type Point struct {
	OfferedPerSec  float64 `json:"offered_per_s"`
	AchievedPerSec float64 `json:"achieved_per_s"`
	P50Ms          float64 `json:"p50_ms"`
	P99Ms          float64 `json:"p99_ms"`
	ConvergeMs     float64 `json:"converge_ms"`                       // load stopped → every observer shows every user's truth
	Wrong          int     `json:"wrong"`                             // users still shown wrongly once converged (or at the deadline)
	CPUUsPerChange float64 `json:"cpu_us_per_change"`                 // broker user+sys CPU per change made
	RedisCPUUs     float64 `json:"redis_cpu_us_per_change,omitempty"` // redis-server's, presenced-redis only
	LoadCPUUs      float64 `json:"load_cpu_us_per_change"`            // the load generator's (this process)
	// LoadShare is the load generator's CPU over the step (its load and
	// convergence) as a share of the machine's (0–1: its CPU time ÷ wall
	// time × CPUs); MachineBusy the share of the machine's CPU time busy
	// over the same window, every process included (/proc/stat): what the
	// broker, the generator and anything else running left idle.
	LoadShare   float64 `json:"load_share,omitempty"`
	MachineBusy float64 `json:"machine_busy,omitempty"`
	// MachineStolen is the share of the machine's CPU time over the same
	// window that the hypervisor gave to other guests while this one had
	// work (/proc/stat's steal; counted in MachineBusy too): CPU this
	// machine's processes waited for, outside anything they do.
	MachineStolen float64 `json:"machine_stolen,omitempty"`
	// TapPerSec is how many messages per second the tap (--ceiling-tap:
	// a subscriber to other topics, such as the lifecycle outputs')
	// received during the step's load; TapPerChange the same per change.
	TapPerSec    float64 `json:"tap_per_s,omitempty"`
	TapPerChange float64 `json:"tap_per_change,omitempty"`
	Sustained    bool    `json:"sustained"` // p99 within the bound and the rate achieved
	// Common: a step offered after the search, on a fresh broker, at the
	// round's common rate (the lowest ceiling of the round's systems), so
	// that CPU per change compares every system at one rate.
	Common bool `json:"common,omitempty"`
}

// Metrics: every figure a scenario measures; zero-valued ones were not
// measured by that scenario (omitted from JSON).
type Metrics struct {
	Sessions          int      `json:"sessions,omitempty"`
	PingsPerSec       float64  `json:"pingreq_per_s,omitempty"`       // PINGREQ answered per second
	CPUPerPingUs      float64  `json:"cpu_us_per_ping,omitempty"`     // broker CPU (user+sys) per PINGREQ
	RSSPerSessionKiB  float64  `json:"rss_kib_per_session,omitempty"` // (RSS loaded − RSS empty) / sessions
	RSSMiB            float64  `json:"rss_mib,omitempty"`             // broker resident memory with the load
	ConnectsPerSec    float64  `json:"connects_per_s,omitempty"`
	ConnackP99Ms      float64  `json:"connack_p99_ms,omitempty"`
	ConvergeMs        float64  `json:"converge_ms,omitempty"`         // until every observer shows the right status
	Latency           *Summary `json:"latency_ms,omitempty"`          // client action → observer receives the change
	Detection         *Summary `json:"detection_s,omitempty"`         // silent death → observer sees offline
	DetectionLimitS   float64  `json:"detection_limit_s,omitempty"`   // 1.5 × keep-alive + 1 s
	MessagesPerChange float64  `json:"messages_per_change,omitempty"` // observer messages received per presence change
	ChangesPerSec     float64  `json:"changes_per_s,omitempty"`       // achieved rate of presence changes
	RedisCmdsPerPing  float64  `json:"redis_cmds_per_ping,omitempty"`
	ObserverMsgs      int64    `json:"observer_messages,omitempty"`
}

// Summary of a distribution.
type Summary struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Correctness counts what observers were shown wrongly.
type Correctness struct {
	Ghosts          int `json:"ghosts"`            // shown online after death past the detection window
	WrongOffline    int `json:"wrong_offline"`     // shown offline while a device was live
	StaleOverwrites int `json:"stale_overwrites"`  // an older connection's will or status shown after a newer one
	BackwardVersion int `json:"backward_versions"` // a version lower than one already seen (presenced only)
}

// CeilingCompare is the ceiling scenario's systems side by side (issue
// 23), computed by bench/report from the runs and written with them: each
// system's ceiling and CPU per change, and presenced's against bare
// mochi's cycle (mochi-bare), round by round.
type CeilingCompare struct {
	Rounds  int             `json:"rounds"` // rounds with a successful ceiling run of mochi-bare
	Systems []CeilingSystem `json:"systems"`
	Ratios  []CeilingRatio  `json:"ratios,omitempty"` // per presenced system, against mochi-bare
	// ByRound is each round's ceiling ratio beside what the hypervisor
	// took during each system's search: on a shared machine a round's
	// ratio moves with it.
	ByRound []CeilingRound `json:"by_round,omitempty"`
}

// CeilingRound is one round of a presenced system against mochi-bare.
type CeilingRound struct {
	Round      int     `json:"round"`
	System     string  `json:"system"`
	CeilingPct float64 `json:"ceiling_pct"` // 100 × presenced's ceiling ÷ mochi-bare's
	// Stolen and MochiStolen: the share of the machine's CPU time the
	// hypervisor took (/proc/stat's steal) during presenced's search and
	// mochi-bare's, 0–1.
	Stolen      float64 `json:"stolen"`
	MochiStolen float64 `json:"mochi_stolen"`
}

// CeilingSystem is one system's ceiling: the median of its rounds.
type CeilingSystem struct {
	System         string   `json:"system"`
	CeilingPerSec  float64  `json:"ceiling_per_s"` // achieved at the highest sustained step (p99 within the bound)
	P99Ms          float64  `json:"p99_ms"`
	CPUUsPerChange float64  `json:"cpu_us_per_change"` // the broker's, at its ceiling step
	RedisCPUUs     float64  `json:"redis_cpu_us_per_change,omitempty"`
	LoadCPUUs      float64  `json:"load_cpu_us_per_change"`   // the load generator's
	LoadShare      float64  `json:"load_share"`               // the generator's share of the machine's CPU at the ceiling step (0–1)
	MachineBusy    float64  `json:"machine_busy"`             // the machine's busy share over that step, every process (0–1)
	MachineStolen  *float64 `json:"machine_stolen,omitempty"` // the share the hypervisor took over that step (0–1); nil: not measured (runs before it was)
	// At the common rate: the highest rate offered that every system of
	// the round sustained, where CPU per change compares like with like.
	CommonPerSec     float64 `json:"common_per_s,omitempty"`
	CommonCPUUs      float64 `json:"common_cpu_us_per_change,omitempty"`
	CommonRedisCPUUs float64 `json:"common_redis_cpu_us_per_change,omitempty"`
	CommonLoadCPUUs  float64 `json:"common_load_cpu_us_per_change,omitempty"`
}

// CeilingRatio is a presenced system against mochi-bare, each figure
// taken round by round (both systems of the same round) and given as the
// median of the rounds with their min and max.
type CeilingRatio struct {
	System string `json:"system"`
	// CeilingPct: 100 × presenced's ceiling ÷ mochi-bare's.
	CeilingPct Spread `json:"ceiling_pct"`
	// CPUPct: 100 × presenced's CPU per change ÷ mochi-bare's, both at
	// the round's common rate (the broker process alone).
	CPUPct Spread `json:"cpu_pct"`
	// SharePct: presence's share of a change, 100 × (presenced's µs per
	// change − mochi-bare's) ÷ mochi-bare's, at the common rate.
	SharePct Spread `json:"share_pct"`
	// ShareWithRedisPct: the same with redis-server's CPU counted as
	// presence's (presenced-redis only).
	ShareWithRedisPct *Spread `json:"share_with_redis_pct,omitempty"`
}

// Spread is a figure over rounds: the median (the lower middle one for an
// even count), min and max of N rounds; N 0: not measured.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}
