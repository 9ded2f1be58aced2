package trigger

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// OnTimeWindow is how late a tick may be noticed and still count as on time. A
// coordinator checks schedules every few seconds; a tick older than this was missed
// (every coordinator was down, or the store was), and the schedule's missed policy
// decides about it.
const OnTimeWindow = 2 * time.Minute

// MaxScheduledWorkflows is how many enabled registered workflows with on: schedule one
// project may have. Each definition starts at most one run a minute, so with its
// pipeline file a project's schedules start at most MaxScheduledWorkflows+1 runs a
// minute. Registering one more is refused; a project that holds more anyway (registered
// at the same moment) fires the first by name and logs the others.
const MaxScheduledWorkflows = 20

// MaxTicks bounds the ticks NextTicks returns and Due counts, so that a minutely
// schedule asked about a year costs little.
const MaxTicks = 1000

// NextTicks returns the schedule's ticks t with after < t <= until, in order, in the
// schedule's time zone; at most MaxTicks of them (ask again from the last to go on).
func NextTicks(s pipeline.Schedule, after, until time.Time) ([]time.Time, error) {
	sched, loc, err := s.Parse()
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", s.Cron, err)
	}
	var out []time.Time
	for t := after.In(loc); len(out) < MaxTicks; {
		t = sched.Next(t)
		if t.IsZero() || t.After(until) {
			break
		}
		out = append(out, t)
	}
	return out, nil
}

// Decision is what Due says about one schedule at one moment.
type Decision struct {
	// Fire says to start a run now, for Tick.
	Fire bool
	// Tick is the latest tick due by now and not yet handled; zero when none is. The caller
	// records it as the schedule's last fired tick whether or not Fire is set, so that a
	// tick given up is not considered again.
	Tick time.Time
	// Missed counts the ticks after the last fired one that will never run (at most
	// MaxTicks): all but Tick, and Tick too when it is not fired.
	Missed int
	// Next is the first tick after now: when to ask again.
	Next time.Time
	// Reason says what was decided and why, for logs and the dashboard.
	Reason string
}

// Due decides whether a schedule fires at now, given the tick it last fired for (zero
// for a schedule that never has) and since, when the schedule came to be (zero when that
// is not known). Only one run ever comes of a backlog: a tick noticed within OnTimeWindow
// fires; an older one fires only under missed: run_once, and every tick before the latest
// is dropped. A schedule that never fired has missed nothing: only a tick within
// OnTimeWindow of now can fire. Only ticks strictly after since are the schedule's: one
// created at 07:10:32 fires first for 07:11, though the 07:10 tick is within the window.
func Due(s pipeline.Schedule, lastFired, since, now time.Time) (Decision, error) {
	sched, loc, err := s.Parse()
	if err != nil {
		return Decision{}, fmt.Errorf("schedule %q: %w", s.Cron, err)
	}
	now = now.In(loc)
	from := lastFired
	if from.IsZero() {
		from = now.Add(-OnTimeWindow)
	}
	if since.After(from) {
		from = since // sched.Next(from) is strictly after it
	}
	d := Decision{Next: sched.Next(now)}
	first := sched.Next(from.In(loc))
	if first.IsZero() || first.After(now) {
		d.Reason = "no tick is due; the next is at " + stamp(d.Next)
		return d, nil
	}
	latest, count := latestTick(sched, first, now)
	d.Tick = latest
	d.Missed = count - 1
	late := now.Sub(latest)
	switch {
	case late <= OnTimeWindow:
		d.Fire = true
		d.Reason = "tick " + stamp(latest) + " is due"
	case s.Missed == pipeline.MissedRunOnce:
		d.Fire = true
		d.Reason = fmt.Sprintf("tick %s was missed by %s; missed: run_once runs it now", stamp(latest), late.Round(time.Second))
	default:
		d.Missed = count
		d.Reason = fmt.Sprintf("tick %s was missed by %s; missed: skip does not run it", stamp(latest), late.Round(time.Second))
	}
	if earlier := count - 1; earlier > 0 {
		atLeast := ""
		if count >= MaxTicks {
			atLeast = "at least "
		}
		d.Reason += fmt.Sprintf("; %s%d earlier %s dropped", atLeast, earlier, plural(earlier, "tick", "ticks"))
	}
	return d, nil
}

// latestTick returns the last tick at or before now, starting from first (a tick at or
// before now), and how many ticks there are from first to it, counted up to MaxTicks.
func latestTick(sched cron.Schedule, first, now time.Time) (time.Time, int) {
	t, count := first, 1
	for count < MaxTicks {
		n := sched.Next(t)
		if n.IsZero() || n.After(now) {
			return t, count
		}
		t, count = n, count+1
	}
	// A long backlog: rather than walk it tick by tick, look back from now over doubling
	// spans until one holds a tick, then walk the few ticks in it.
	for span := time.Minute; ; span *= 2 {
		from := now.Add(-span)
		if from.Before(t) {
			from = t
		}
		n := sched.Next(from)
		if n.IsZero() || n.After(now) {
			if !from.After(t) {
				return t, count // no tick after t: t is the latest
			}
			continue
		}
		t = n
		for {
			n := sched.Next(t)
			if n.IsZero() || n.After(now) {
				return t, count
			}
			t = n
		}
	}
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Format("2006-01-02 15:04 MST")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
