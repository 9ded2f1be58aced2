package api

import "net/http"

// retryRun gives the failed, cancelled and skipped jobs of a finished run a new attempt.
func (s *Server) retryRun(w http.ResponseWriter, r *http.Request) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	if err := s.store.RetryRun(r.Context(), id); err != nil {
		s.storeError(w, r, "retry run", err)
		return
	}
	s.writeRun(w, r, id, http.StatusAccepted)
}

// retryJob gives a failed, cancelled or skipped job, and the same downstream of it, a new
// attempt.
func (s *Server) retryJob(w http.ResponseWriter, r *http.Request) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	if err := s.store.RetryJob(r.Context(), id); err != nil {
		s.storeError(w, r, "retry job", err)
		return
	}
	s.writeJob(w, r, id, http.StatusAccepted)
}
