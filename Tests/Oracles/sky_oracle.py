#!/usr/bin/env python3
"""Independent oracle for the simulated sky (standard library only; shares no code with the
Swift implementation).

Usage: sky_oracle.py ALMANAC.yuma < queries.json > answers.json

Each query is {"utc_ms": INT, "lat": DEG, "lon": DEG, "h": METRES_ABOVE_ELLIPSOID} and gets
{"gps": {"PRN": [elevation, azimuth], ...}} for every healthy GPS satellite above the horizon,
from the YUMA almanac propagated with the IS-GPS-200 almanac equations (Table 20-IV), written
here from the specification: Kepler's equation by fixed-point iteration, the node corrected for
the earth's rotation, WGS84 geodetic to ECEF, a rotation matrix to east-north-up.

A query may also carry "dop": {"satellites": [[el, az], ...]} (degrees, as GSV gives them); the
answer then has "dop": {"hdop", "vdop", "pdop", "spread": {...}}: the DOPs of that geometry with
one receiver clock term, and the largest change of each over 200 seeded draws of angles anywhere
within +-0.5 degree of the given whole degrees (what GSV's rounding leaves unknown).
"""
import json
import math
import random
import sys

MU = 3.986005e14
EARTH_RATE = 7.2921151467e-5
A_WGS84 = 6378137.0
F_WGS84 = 1.0 / 298.257223563
GPS_EPOCH_UNIX = 315964800
LEAP_SECONDS = 18
WEEK = 604800.0


def read_almanac(path):
    records = []
    current = {}
    with open(path) as handle:
        for line in handle:
            line = line.strip()
            if line.startswith("*"):
                if current:
                    records.append(current)
                current = {}
                continue
            if ":" not in line:
                continue
            label, value = line.split(":", 1)
            key = label.split("(")[0].split()[0].lower()  # id, health, eccentricity, time, ...
            if label.lower().startswith("right ascen at"):
                key = "omega0"
            elif label.lower().startswith("rate of right"):
                key = "omegadot"
            elif label.lower().startswith("argument of"):
                key = "w"
            elif label.lower().startswith("mean anom"):
                key = "m0"
            elif label.lower().startswith("orbital incl"):
                key = "i"
            elif label.lower().startswith("sqrt"):
                key = "sqrta"
            elif label.lower().startswith("time of"):
                key = "toa"
            current[key] = float(value)
    if current:
        records.append(current)
    return records


def satellite_ecef(record, gps_seconds):
    week = int(record["week"])
    if week < 1024:
        now_week = gps_seconds / WEEK
        week = min((week + 1024 * k for k in range(9)), key=lambda w: abs(w - now_week))
    tk = gps_seconds - (week * WEEK + record["toa"])
    a = record["sqrta"] ** 2
    n = math.sqrt(MU / a ** 3)
    mean = record["m0"] + n * tk
    e = record["eccentricity"]
    big_e = mean
    for _ in range(60):
        big_e = mean + e * math.sin(big_e)
    nu = 2 * math.atan(math.sqrt((1 + e) / (1 - e)) * math.tan(big_e / 2))
    u = nu + record["w"]
    r = a * (1 - e * math.cos(big_e))
    node = record["omega0"] + (record["omegadot"] - EARTH_RATE) * tk - EARTH_RATE * record["toa"]
    x_p, y_p = r * math.cos(u), r * math.sin(u)
    inc = record["i"]
    return (
        x_p * math.cos(node) - y_p * math.cos(inc) * math.sin(node),
        x_p * math.sin(node) + y_p * math.cos(inc) * math.cos(node),
        y_p * math.sin(inc),
    )


def receiver_ecef(lat, lon, h):
    e2 = F_WGS84 * (2 - F_WGS84)
    p, l = math.radians(lat), math.radians(lon)
    n = A_WGS84 / math.sqrt(1 - e2 * math.sin(p) ** 2)
    return ((n + h) * math.cos(p) * math.cos(l), (n + h) * math.cos(p) * math.sin(l),
            (n * (1 - e2) + h) * math.sin(p))


def look(lat, lon, rx, sat):
    p, l = math.radians(lat), math.radians(lon)
    d = [sat[k] - rx[k] for k in range(3)]
    rows = [
        (-math.sin(l), math.cos(l), 0.0),
        (-math.sin(p) * math.cos(l), -math.sin(p) * math.sin(l), math.cos(p)),
        (math.cos(p) * math.cos(l), math.cos(p) * math.sin(l), math.sin(p)),
    ]
    east, north, up = (sum(row[k] * d[k] for k in range(3)) for row in rows)
    elevation = math.degrees(math.atan2(up, math.hypot(east, north)))
    azimuth = math.degrees(math.atan2(east, north)) % 360.0
    return elevation, azimuth


def invert(m):
    size = len(m)
    a = [row[:] + [1.0 if i == j else 0.0 for j in range(size)] for i, row in enumerate(m)]
    for c in range(size):
        pivot = max(range(c, size), key=lambda r: abs(a[r][c]))
        a[c], a[pivot] = a[pivot], a[c]
        div = a[c][c]
        a[c] = [v / div for v in a[c]]
        for r in range(size):
            if r != c:
                f = a[r][c]
                a[r] = [a[r][k] - f * a[c][k] for k in range(2 * size)]
    return [row[size:] for row in a]


def dops(angles):
    g = []
    for el, az in angles:
        e, a = math.radians(el), math.radians(az)
        g.append((-math.cos(e) * math.sin(a), -math.cos(e) * math.cos(a), -math.sin(e), 1.0))
    gtg = [[sum(row[i] * row[j] for row in g) for j in range(4)] for i in range(4)]
    q = invert(gtg)
    return {
        "hdop": math.sqrt(q[0][0] + q[1][1]),
        "vdop": math.sqrt(q[2][2]),
        "pdop": math.sqrt(q[0][0] + q[1][1] + q[2][2]),
    }


def main():
    records = [r for r in read_almanac(sys.argv[1]) if int(r["health"]) == 0]
    queries = json.load(sys.stdin)
    answers = []
    for query in queries:
        gps = query["utc_ms"] / 1000.0 - GPS_EPOCH_UNIX + LEAP_SECONDS
        rx = receiver_ecef(query["lat"], query["lon"], query["h"])
        sky = {}
        for record in records:
            el, az = look(query["lat"], query["lon"], rx, satellite_ecef(record, gps))
            if el > 0:
                sky[str(int(record["id"]))] = [el, az]
        answer = {"gps": sky}
        if "dop" in query:
            angles = query["dop"]["satellites"]
            base = dops(angles)
            rng = random.Random(1)
            spread = {k: 0.0 for k in base}
            for _ in range(200):
                moved = dops([(el + rng.uniform(-0.5, 0.5), az + rng.uniform(-0.5, 0.5))
                              for el, az in angles])
                for k in base:
                    spread[k] = max(spread[k], abs(moved[k] - base[k]))
            base["spread"] = spread
            answer["dop"] = base
        answers.append(answer)
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    main()
