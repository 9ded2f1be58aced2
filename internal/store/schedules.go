package store

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// ScheduleTick names one tick of one schedule of a project. Key identifies the schedule
// within its project (which file or workflow declares it, and its cron line and zone),
// so that editing a schedule starts it afresh.
type ScheduleTick struct {
	Key string
	At  time.Time
}

// Schedules keeps, per schedule, the last tick it handled: fired (a run was created for
// it) or given up (missed: skip). Every change is a compare-and-swap that only moves a
// schedule's tick forward, so any number of coordinator replicas may race for one tick
// and exactly one wins it. CreateRunParams.Tick takes a tick in the transaction that
// creates the tick's run.
type Schedules interface {
	// ScheduleTicks returns the last tick each of the project's schedules handled, by key.
	ScheduleTicks(ctx context.Context, projectID uuid.UUID) (map[string]time.Time, error)
	// SkipTick records that the project's schedule handled tick without a run. It
	// returns false, changing nothing, when the schedule already handled that tick or a
	// later one.
	SkipTick(ctx context.Context, projectID uuid.UUID, tick ScheduleTick) (bool, error)
}
