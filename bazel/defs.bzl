"""Compiler flags shared by every C target of the project."""

FL_COPTS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE"]

FL_CXXOPTS = ["-std=c++17", "-Wall", "-Wextra"]
