package presenced

import (
	"github.com/presenced/presenced/roster"
	"github.com/presenced/presenced/stats"
)

// groupResumeStats are the figures of the group topics' resume (a
// SUBSCRIBE with the version the client holds): served from the log,
// fallbacks to the snapshot by cause, and the log's size.
func (p *Plugin) groupResumeStats() []stats.Stat {
	r := &p.groups.Resumes
	causes := make([]string, 0, len(roster.Causes)+1)
	for _, c := range roster.Causes {
		causes = append(causes, string(c))
	}
	causes = append(causes, "ambiguous")
	return []stats.Stat{
		counter("group_resumes_total", "Group topic resumes (SUBSCRIBE with the version held) served from this node's log: one delta, or nothing when the version held was the current one.", func() int64 { return r.Resumed.Load() + r.Current.Load() }),
		counter("group_resumes_current_total", "Group topic resumes that held the current version: sent nothing.", r.Current.Load),
		byLabel(stats.Counter, "group_resume_fallbacks_total", "Group topic resumes sent the snapshot instead, by cause: garbage (not a version), future (above the node's version), too_old (past the log), cold (no log up to the current version on this node), ambiguous (several group filters in one SUBSCRIBE).", "cause",
			causes, func(c string) int64 {
				if c == "ambiguous" {
					return r.Ambiguous.Load()
				}
				return r.Fallbacks(roster.Cause(c))
			}, nil),
		counter("group_resume_deflated_total", "Group topic resume replies sent in raw DEFLATE (SUBSCRIBE user property encoding=deflate), to that subscriber only.", r.Deflated.Load),
		counter("group_resume_deflate_saved_bytes_total", "Payload bytes the resume replies sent in raw DEFLATE saved against their plain JSON.", r.DeflateSaved.Load),
		counter("group_resume_unknown_encoding_total", "Group topic resumes with an encoding user property not known (not deflate): sent plain JSON.", r.UnknownEncoding.Load),
		gauge("group_resume_log_groups", "Groups with batches in this node's resume log.", func() int64 { return int64(p.groups.LogStats().Groups) }),
		gauge("group_resume_log_deltas", "Batches in this node's resume log, all groups.", func() int64 { return int64(p.groups.LogStats().Deltas) }),
		gauge("group_resume_log_bytes", "Bytes (JSON) of the batches in this node's resume log, all groups.", func() int64 { return int64(p.groups.LogStats().Bytes) }),
	}
}
