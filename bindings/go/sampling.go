package kiln

// #include "kiln/c/kiln.h"
import "C"

import "runtime"

// ---- random numbers ---------------------------------------------------------------
// Threefry-2x32 under explicit keys (kiln/random.h): a key is a uint32 array of shape
// (2), and the same key gives the same numbers on every device.

// RandomKey is the key of a seed.
func RandomKey(seed uint64) (*Array, error) {
	return newArray(func(o *C.kiln_array) C.int { return C.kiln_random_key(o, C.uint64_t(seed)) })
}

// RandomSplit makes num new keys (shape (num, 2)) from one.
func RandomSplit(key *Array, num int) (*Array, error) {
	return unary(key, func(o *C.kiln_array, k C.kiln_array) C.int { return C.kiln_random_split(o, k, C.int(num)) })
}

// RandomBits is random uint32 words of the given shape.
func RandomBits(key *Array, shape ...int) (*Array, error) {
	cs := cShape(shape)
	return unary(key, func(o *C.kiln_array, k C.kiln_array) C.int {
		return C.kiln_random_bits(o, ptr64(cs), C.int(len(cs)), k)
	})
}

// RandomUniform is uniform in [low, high) of a floating dtype.
func RandomUniform(key *Array, dtype Dtype, low, high float64, shape ...int) (*Array, error) {
	cs := cShape(shape)
	return unary(key, func(o *C.kiln_array, k C.kiln_array) C.int {
		return C.kiln_random_uniform(o, ptr64(cs), C.int(len(cs)), k, C.kiln_dtype(dtype), C.double(low), C.double(high))
	})
}

// RandomNormal is normal with mean loc and standard deviation scale.
func RandomNormal(key *Array, dtype Dtype, loc, scale float64, shape ...int) (*Array, error) {
	cs := cShape(shape)
	return unary(key, func(o *C.kiln_array, k C.kiln_array) C.int {
		return C.kiln_random_normal(o, ptr64(cs), C.int(len(cs)), k, C.kiln_dtype(dtype), C.double(loc), C.double(scale))
	})
}

// RandomBernoulli is true with probability p, elementwise.
func RandomBernoulli(p, key *Array) (*Array, error) {
	return binary(p, key, func(o *C.kiln_array, x, k C.kiln_array) C.int { return C.kiln_random_bernoulli(o, x, k) })
}

// RandomCategorical draws int32 indices from softmax(logits) along axis, which it removes.
func RandomCategorical(logits, key *Array, axis int) (*Array, error) {
	return binary(logits, key, func(o *C.kiln_array, x, k C.kiln_array) C.int {
		return C.kiln_random_categorical(o, x, k, C.int(axis))
	})
}

// ---- sorting and selection ----------------------------------------------------------
// Along axis, NaN after every number (numpy.sort's order); indices are int32.

// TopK is the k largest elements along axis, largest first (equal ones in index order),
// and their indices.
func TopK(a *Array, k, axis int) (values, indices *Array, err error) {
	var v, i C.kiln_array
	err = call(func() C.int { return C.kiln_topk(&v, &i, a.handle(), C.int(k), C.int(axis)) })
	runtime.KeepAlive(a)
	if err != nil {
		return nil, nil, err
	}
	return wrap(v), wrap(i), nil
}

// Sort sorts along axis.
func Sort(a *Array, axis int) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_sort(o, x, C.int(axis)) })
}

// Argsort is the indices that sort a along axis (stable).
func Argsort(a *Array, axis int) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_argsort(o, x, C.int(axis)) })
}

// Argpartition is indices putting the kth smallest in place, no larger one before it and
// no smaller one after it.
func Argpartition(a *Array, kth, axis int) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_argpartition(o, x, C.int(kth), C.int(axis)) })
}

// Partition is a rearranged as Argpartition says.
func Partition(a *Array, kth, axis int) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_partition(o, x, C.int(kth), C.int(axis)) })
}
