package storeutil

import (
	"errors"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// The audit chain's steps over either dialect (design: Audit chain); each
// adapter supplies its transaction, queries and row types.

// AppendAudit appends r at at to the chain inside the caller's
// transaction: tail reads the last entry's seq and hash (noRows, the
// driver's no-rows error, for an empty chain), insert writes the chained
// entry, which it returns. mapErr maps the driver's errors.
func AppendAudit(at time.Time, r domain.AuditRecord, noRows error, mapErr func(string, error) error,
	tail func() (int64, string, error), insert func(domain.AuditEntry) error) (domain.AuditEntry, error) {
	seq, hash, err := tail()
	if err != nil && !errors.Is(err, noRows) {
		return domain.AuditEntry{}, mapErr("append audit", err)
	}
	e, err := AuditEntry(seq+1, hash, at, r)
	if err != nil {
		return domain.AuditEntry{}, err
	}
	if err := insert(e); err != nil {
		return domain.AuditEntry{}, mapErr("append audit", err)
	}
	return e, nil
}

// Audited is fn followed, when it succeeds, by add (which appends the
// change's audit entry) in the same transaction: the shape of every
// audited change (store conventions: the audit record commits with the
// change).
func Audited[Tx any](fn func(Tx) error, add func(Tx) error) func(Tx) error {
	return func(tx Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return add(tx)
	}
}

// InTx runs f in a transaction of run and returns what its last run
// returned.
func InTx[Tx, T any](run func(func(Tx) error) error, f func(Tx) (T, error)) (T, error) {
	var v T
	err := run(func(tx Tx) error {
		var err error
		v, err = f(tx)
		return err
	})
	return v, err
}

// VerifyQuery streams the rows query returns (AuditChainSQL, in one
// snapshot) through VerifyChain and closes them with closeRows.
func VerifyQuery[R Rows](query func() (R, error), closeRows func(R), scan func(Scanner) (domain.AuditEntry, error), scoped bool, agentIDs []string) (domain.AuditVerifyResult, error) {
	rows, err := query()
	if err != nil {
		return domain.AuditVerifyResult{}, err
	}
	defer closeRows(rows)
	return VerifyChain(rows, scan, scoped, agentIDs)
}
