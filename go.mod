module github.com/sparsetune/sparsetune

go 1.26
