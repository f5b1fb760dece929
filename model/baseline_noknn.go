//go:build !cgo

package model

import "errors"

// knnAvailable: golearn's knn package compiles only with cgo.
const knnAvailable = false

func fitKNN([]string, []BaselineExample) (classifier, error) {
	return nil, errors.New("the knn baseline needs a build with cgo: golearn's knn package holds C code")
}
