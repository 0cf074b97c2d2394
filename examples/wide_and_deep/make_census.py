#!/usr/bin/env python3
"""Writes a census-like CSV for the wide & deep example: numeric (age, hours_per_week),
categorical (education, marital_status, occupation) features and a 0/1 label whose odds
depend on each and on education crossed with occupation. Standard library only.

    python3 examples/wide_and_deep/make_census.py OUT_DIR [--train 20000 --test 5000 --seed 7]

writes OUT_DIR/train.csv and OUT_DIR/test.csv.
"""
import argparse
import csv
import math
import os
import random

EDUCATION = ["Preschool", "HS-grad", "Some-college", "Assoc", "Bachelors", "Masters",
             "Prof-school", "Doctorate"]
MARITAL = ["Never-married", "Married", "Divorced", "Widowed"]
OCCUPATION = ["Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial",
              "Prof-specialty", "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical",
              "Farming-fishing", "Transport-moving", "Priv-house-serv", "Protective-serv",
              "Armed-Forces"]


def rows(n, rng, effects):
    for _ in range(n):
        age = min(90.0, max(17.0, rng.gauss(40, 13)))
        hours = min(99.0, max(1.0, rng.gauss(40, 12)))
        edu = rng.choice(EDUCATION)
        marital = rng.choice(MARITAL)
        occ = rng.choice(OCCUPATION)
        logit = (-0.2 + 0.035 * (age - 40) - 0.0006 * (age - 45) ** 2 + 0.03 * (hours - 40)
                 + effects["edu"][edu] + effects["marital"][marital] + effects["occ"][occ]
                 + effects["cross"][(edu, occ)])
        label = int(rng.random() < 1 / (1 + math.exp(-logit)))
        yield [f"{age:.0f}", f"{hours:.0f}", edu, marital, occ, label]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--train", type=int, default=20000)
    parser.add_argument("--test", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    effects = {
        "edu": {e: 0.3 * (i - 3.5) for i, e in enumerate(EDUCATION)},
        "marital": {"Never-married": -0.8, "Married": 0.9, "Divorced": -0.3, "Widowed": -0.4},
        "occ": {o: rng.gauss(0, 0.6) for o in OCCUPATION},
        "cross": {(e, o): rng.gauss(0, 0.8) for e in EDUCATION for o in OCCUPATION},
    }
    os.makedirs(args.out_dir, exist_ok=True)
    header = ["age", "hours_per_week", "education", "marital_status", "occupation", "label"]
    for name, n in (("train.csv", args.train), ("test.csv", args.test)):
        with open(os.path.join(args.out_dir, name), "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            writer.writerows(rows(n, rng, effects))


if __name__ == "__main__":
    main()
