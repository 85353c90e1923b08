package main

// The sequential specification porcupine checks the history against: one register per key
// (porcupine partitions the history by key, so each partition's state is a single value),
// whose state is the document's current value, "" while it does not exist.
//
// Every write stores a value no other write stores, so a value names the write that made it,
// and a document version's CAS names its value: a CAS replace is modelled as compare-and-set
// on the value the client had read. An insert is compare-and-set from "" (absent).
//
// An ambiguous operation (a timeout, SYNC_WRITE_AMBIGUOUS, a dropped connection...) may or may
// not have taken effect. It is recorded with output `unknown` and a return time after every
// other operation of the history: porcupine may then linearize it at any point after its
// invocation, including after everything else, where it changes nothing anyone observed; so
// the model's step for `unknown` applies the write (or, for a compare-and-set, applies it if
// the value matches and otherwise leaves the state as it is) and always accepts. Both "it
// happened" and "it did not" are thereby allowed.

import (
	"fmt"
	"sort"

	"github.com/anishathalye/porcupine"
)

type opKind int

const (
	opGet opKind = iota
	opUpsert
	opCAS // Replace with the CAS of a read (Expected: the value read), or Insert (Expected "")
)

// kvInput is what a client asked.
type kvInput struct {
	Kind     opKind
	Key      string
	Value    string // the value written (opUpsert, opCAS)
	Expected string // opCAS: the value the client had read; "" for an insert
}

type outcome int

const (
	outOK       outcome = iota
	outMismatch         // Replace: ErrCasMismatch, so the document exists with another value
	outNotFound         // Replace: ErrDocumentNotFound, so the document does not exist
	outExists           // Insert: ErrDocumentExists, so the document exists
	outFailed           // refused before anything was written (ErrDurabilityImpossible...)
	outUnknown          // may or may not have taken effect
)

var outcomeNames = [...]string{"ok", "cas mismatch", "not found", "exists", "failed", "unknown"}

// kvOutput is what the client was answered.
type kvOutput struct {
	Outcome outcome
	Value   string // opGet: the value read ("" when not found)
}

// step applies one operation to one key's register.
func step(state, input, output any) (bool, any) {
	value := state.(string)
	in := input.(kvInput)
	out := output.(kvOutput)
	switch in.Kind {
	case opGet:
		return out.Value == value, value
	case opUpsert:
		if out.Outcome == outFailed {
			return true, value
		}
		return true, in.Value // outOK, or outUnknown linearized where it took effect
	default: // opCAS
		switch out.Outcome {
		case outOK:
			return value == in.Expected, in.Value
		case outMismatch:
			return value != "" && value != in.Expected, value
		case outNotFound:
			return value == "", value
		case outExists:
			return value != "", value
		case outFailed:
			return true, value
		default: // outUnknown
			if value == in.Expected {
				return true, in.Value
			}
			return true, value
		}
	}
}

func describeOperation(input, output any) string {
	in := input.(kvInput)
	out := output.(kvOutput)
	switch in.Kind {
	case opGet:
		return fmt.Sprintf("get(%s) -> %q", in.Key, out.Value)
	case opUpsert:
		return fmt.Sprintf("upsert(%s, %q) -> %s", in.Key, in.Value, outcomeNames[out.Outcome])
	default:
		if in.Expected == "" {
			return fmt.Sprintf("insert(%s, %q) -> %s", in.Key, in.Value, outcomeNames[out.Outcome])
		}
		return fmt.Sprintf("replace(%s, cas of %q, %q) -> %s", in.Key, in.Expected, in.Value, outcomeNames[out.Outcome])
	}
}

// registerModel is the per-key register model, partitioned by key.
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			key := op.Input.(kvInput).Key
			byKey[key] = append(byKey[key], op)
		}
		keys := make([]string, 0, len(byKey))
		for key := range byKey {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		partitions := make([][]porcupine.Operation, 0, len(keys))
		for _, key := range keys {
			partitions = append(partitions, byKey[key])
		}
		return partitions
	},
	Init:              func() any { return "" },
	Step:              step,
	Equal:             func(a, b any) bool { return a.(string) == b.(string) },
	DescribeOperation: describeOperation,
	DescribeState:     func(state any) string { return fmt.Sprintf("%q", state.(string)) },
}

// lostWrite is an acknowledged write whose value the healed cluster no longer holds although
// no write that may have come after it explains the final value.
type lostWrite struct {
	key, value, final string
}

// lostWrites counts the acknowledged writes lost, given the value each key holds after healing.
//
// An acknowledged write w (upsert, replace or insert answered success; with majority
// durability) is lost when the key's final value is neither w's value nor the value of another
// write x that may be ordered after w: x acknowledged and not returned before w was invoked
// (x.Return >= w.Call), or x ambiguous (it may have taken effect at any time after its
// invocation). Keys without a final read are skipped; failed writes never count.
func lostWrites(history []porcupine.Operation, final map[string]string) []lostWrite {
	writes := map[string][]porcupine.Operation{}
	for _, op := range history {
		in := op.Input.(kvInput)
		out := op.Output.(kvOutput)
		if in.Kind != opGet && (out.Outcome == outOK || out.Outcome == outUnknown) {
			writes[in.Key] = append(writes[in.Key], op)
		}
	}
	var lost []lostWrite
	for key, value := range final {
		for _, w := range writes[key] {
			win := w.Input.(kvInput)
			if w.Output.(kvOutput).Outcome != outOK || win.Value == value {
				continue
			}
			explained := false
			for _, x := range writes[key] {
				xin := x.Input.(kvInput)
				if xin.Value == value && (x.Output.(kvOutput).Outcome == outUnknown || x.Return >= w.Call) {
					explained = true
					break
				}
			}
			if !explained {
				lost = append(lost, lostWrite{key: key, value: win.Value, final: value})
			}
		}
	}
	sort.Slice(lost, func(i, j int) bool {
		return lost[i].key < lost[j].key || lost[i].key == lost[j].key && lost[i].value < lost[j].value
	})
	return lost
}
