"""Write attnviz/inputs/corpus.txt: the Q/K map's default sentences, made from templates.

Every sentence is written here from small word lists (no outside text, so no licence
question), seeded, so running it again gives the same file:

    .venv/bin/python scripts/make_corpus.py
"""

from __future__ import annotations

import random
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "attnviz" / "inputs" / "corpus.txt"

NOUNS = ["cat", "dog", "teacher", "student", "river", "city", "robot", "farmer", "painter", "child", "doctor",
         "bird", "train", "garden", "window", "letter", "mountain", "kitchen", "library", "engine", "baker",
         "sailor", "lamp", "bridge", "forest", "pilot", "violin", "market", "island", "clock"]
ADJS = ["old", "small", "bright", "quiet", "red", "tired", "clever", "cold", "busy", "green", "gentle", "loud",
        "empty", "heavy", "young", "strange"]
VERBS = [("sees", "saw"), ("finds", "found"), ("paints", "painted"), ("follows", "followed"), ("helps", "helped"),
         ("watches", "watched"), ("carries", "carried"), ("visits", "visited"), ("builds", "built"),
         ("remembers", "remembered"), ("calls", "called"), ("cleans", "cleaned")]
PLACES = ["near the river", "in the kitchen", "after dinner", "before sunrise", "under the bridge", "at the market",
          "on the island", "in the library", "by the window", "during the storm"]
NAMES = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana", "Ivo", "Jun", "Kofi", "Lena"]

CJK = [
    "我爱人工智能。", "猫坐在窗边。", "老师在教室里读书。", "今天的天气很好。", "他每天早上跑步。",
    "我们明天去公园吧！",
    "这本书非常有意思。", "小狗跟着孩子跑。", "城市的夜晚很安静。", "她在厨房里做饭。", "火车准时到站了。",
    "你喜欢喝茶还是咖啡？", "学生们在图书馆学习。", "山上有一座古老的寺庙。", "河水慢慢地流向大海。",
    "他的朋友送给他一封信。", "一只鸟飞过了天空。", "我们一起唱歌跳舞。", "妈妈说：早点回家。", "雨停了，太阳出来了。",
    "猫看见了另一只猫。", "我想想，再想想。", "天天学习，天天进步。", "花园里开满了花。", "他把灯关了。",
    "猫が窓のそばで寝ている。", "今日はとても暑いですね。", "私は毎朝コーヒーを飲みます。", "電車が駅に着いた。",
    "先生は本を読んでいます。", "山の上に雪が見える。", "고양이가 창가에 앉아 있다.", "오늘은 날씨가 좋다.",
    "나는 매일 아침 책을 읽는다.", "기차가 역에 도착했다.",
]

REPEATS = [
    "the cat saw the other cat", "dog eats dog", "again and again and again", "the river runs into the river",
    "we walked and walked and walked home", "a rose is a rose is a rose", "one by one, two by two",
    "the more you read, the more you know", "step by step and day by day", "no, no, no, not now",
    "the student asked the student next to her", "Ben called Ben's brother Ben", "red, red, red and blue",
    "the clock said tick, tick, tick", "home sweet home", "the train after the train after this one",
]

QUESTIONS = [
    "Where did the {a} {n} go?", "Why does the {n} look so {a}?", "Who {p} the {n} yesterday?",
    "Can the {n} see the {m} from here?", "Is the {n} {a} today?",
]


def main() -> None:
    rng = random.Random(35)
    lines: list[str] = []
    for _ in range(120):  # statements: subject, verb, object, sometimes a place
        n, m = rng.sample(NOUNS, 2)
        a, b = rng.sample(ADJS, 2)
        present, past = rng.choice(VERBS)
        shape = rng.randrange(4)
        if shape == 0:
            s = f"The {a} {n} {present} the {m}."
        elif shape == 1:
            s = f"A {n} {past} the {b} {m} {rng.choice(PLACES)}."
        elif shape == 2:
            s = f"{rng.choice(NAMES)} {past} a {a} {n}, then the {m}."
        else:
            s = f"Every {n} {present} a {b} {m} {rng.choice(PLACES)}!"
        lines.append(s)
    for _ in range(40):
        n, m = rng.sample(NOUNS, 2)
        lines.append(rng.choice(QUESTIONS).format(a=rng.choice(ADJS), n=n, m=m, p=rng.choice(VERBS)[1]))
    for _ in range(30):  # names, numbers and quotes
        who, other = rng.sample(NAMES, 2)
        k = rng.randrange(2, 60)
        shape = rng.randrange(3)
        if shape == 0:
            lines.append(f"{who} bought {k} {rng.choice(NOUNS)}s for {other}.")
        elif shape == 1:
            lines.append(f"\"Wait here,\" said {who}; {other} waited.")
        else:
            lines.append(f"On day {k}, {who} met {other} {rng.choice(PLACES)}.")
    for _ in range(24):  # the same word twice or more, apart
        n = rng.choice(NOUNS)
        a = rng.choice(ADJS)
        present, past = rng.choice(VERBS)
        lines.append(rng.choice([f"The {n} {past} another {n}.", f"The {a} {n} and the {a} {n} met again.",
                                 f"One {n}, two {n}s, three {n}s.",
                                 f"{present.capitalize()} the {n}, {present} the {n}!"]))
    lines += REPEATS + CJK
    seen, out = set(), []
    for s in lines:
        if s not in seen:
            seen.add(s)
            out.append(s)
    OUT.write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"{len(out)} sentences -> {OUT}")


if __name__ == "__main__":
    main()
