// Package bytesize reads and writes sizes in bytes as operators type
// them: a number with an optional KiB, MiB or GiB.
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a number of bytes; it is a flag.Value.
type Size uint64

type unit struct {
	suffix string
	n      uint64
}

// units are the suffixes Size reads and writes, largest first.
func units() [3]unit {
	return [...]unit{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
}

// String is the size in its largest whole unit: 1GiB, 1536KiB, 1000.
func (b Size) String() string {
	for _, u := range units() {
		if b != 0 && uint64(b)%u.n == 0 {
			return fmt.Sprintf("%d%s", uint64(b)/u.n, u.suffix)
		}
	}
	return fmt.Sprint(uint64(b))
}

// Set reads what String writes, and any number of bytes.
func (b *Size) Set(s string) error {
	num, mult := s, uint64(1)
	for _, u := range units() {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = n, u.n
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n > math.MaxUint64/mult {
		return fmt.Errorf("%q is not a size in bytes (a number, optionally with KiB, MiB or GiB)", s)
	}
	*b = Size(n * mult)
	return nil
}
