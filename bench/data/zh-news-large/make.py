"""Writes corpus.jsonl and questions.jsonl of the zh-news-large evaluation set (see README.md).

    python bench/data/zh-news-large/make.py

Everything is invented (firms, people, products, figures); real places are only settings. The
firms' items come from templates with several wordings each, filled from one fact sheet per firm,
so the gold passages of a question are known by construction; the city, policy, sports and culture
items are written by hand. A question is phrased with other words than its passage, and a check at
the end refuses to write the set when an answer is missing from its gold passages or when a passage
outside the gold holds both the answer and the question's anchor.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
rng = random.Random(20261126)


@dataclass
class Firm:
    name: str
    industry: str  # what it makes, for the wording
    product: str  # the new product's name
    kind: str  # the new product's kind ("扫地机器人")
    spec: str  # the product's distinguishing figure, as written in the item
    spec_q: str  # the question's paraphrase of what the figure measures
    hq: str
    founder: str
    school: str
    hometown: str
    founded: int
    ceo: str
    ceo_prev: str
    investor: str
    amount: int  # funding, 亿元人民币
    revenue: int  # 亿元人民币
    growth: int  # %
    factory_city: str
    capacity: str
    price: str  # with its unit
    partner: str = ""  # the firm supplying it (a bridge)
    facts: dict = field(default_factory=dict)


# name, industry, product, kind, spec, spec_q, hq
FIRMS_RAW = [
    ("澄江机器人", "家用机器人", "澄江S7", "扫地机器人", "吸力达到6000帕", "吸力有多大"),
    ("远帆电池", "动力电池", "远帆固态一号", "固态电池", "能量密度达到每公斤360瓦时", "每公斤能储存多少能量"),
    ("星桥半导体", "芯片", "星桥X3", "车载芯片", "采用7纳米工艺", "用的是几纳米的工艺"),
    ("鹿鸣乳业", "乳制品", "鹿鸣高原牧场", "有机牛奶", "奶源来自海拔3000米的牧场", "奶源牧场的海拔是多少"),
    ("松涛物流", "冷链物流", "松涛冷链快线", "冷链运输线路", "全程温度控制在零下18度", "全程保持多少度"),
    ("金穗食品", "方便食品", "金穗自热米饭", "自热米饭", "加热只需8分钟", "加热需要几分钟"),
    ("银杉生物", "创新药", "银杉-21", "降血糖药物", "三期临床试验有效率为82%", "三期试验的有效率是多少"),
    ("北辰汽车", "新能源汽车", "北辰星河", "纯电动轿车", "续航里程为650公里", "一次充满电能跑多远"),
    ("蓝鲸航运", "远洋航运", "蓝鲸远航号", "液化天然气运输船", "载货量为17万立方米", "能装多少立方米的货"),
    ("云栖游戏", "网络游戏", "山海行记", "开放世界手游", "上线首周下载量突破2000万次", "第一周被下载了多少次"),
    ("赤霄航天", "商业航天", "赤霄二号", "液体运载火箭", "近地轨道运载能力为4吨", "能把多重的载荷送上近地轨道"),
    ("瀚海光电", "光伏组件", "瀚海HX-700", "光伏组件", "转换效率达到24.8%", "光电转换效率是多少"),
    ("丰泽茶业", "茶叶", "丰泽明前龙井", "绿茶礼盒", "每盒只有250克", "一盒装多少克"),
    ("明川医疗", "医疗器械", "明川心眼", "便携式超声仪", "整机重量不到600克", "整机有多重"),
    ("翠屏纺织", "纺织面料", "翠屏凉感布", "凉感面料", "可使体表温度降低2度", "能让皮肤降温几度"),
    ("嘉禾种业", "种子", "嘉禾稻28", "杂交水稻品种", "亩产达到850公斤", "每亩能收多少公斤"),
    ("华岳重工", "工程机械", "华岳QY300", "履带起重机", "最大起重量为300吨", "最多能吊起多少吨"),
    ("天枢智能", "人工智能", "天枢问道", "大语言模型", "参数规模为1300亿", "有多少参数"),
    ("海棠影业", "电影", "《海棠依旧》", "电影", "首日票房为3.2亿元", "上映第一天票房多少"),
    ("凌霄无人机", "无人机", "凌霄鹰眼", "巡检无人机", "可在七级大风中飞行", "能抗几级风"),
    ("锦程旅游", "在线旅游", "锦程慢游", "旅游应用", "注册用户超过5000万", "注册用户有多少"),
    ("启明教育", "在线教育", "启明课堂", "学习平板", "内置4万节课程", "装了多少节课"),
    ("长风风电", "风电设备", "长风16兆瓦", "海上风机", "叶轮直径达到260米", "叶轮直径多大"),
    ("鸿雁快递", "快递", "鸿雁次晨达", "次日上午送达服务", "覆盖120个城市", "覆盖多少个城市"),
    ("清溪水务", "水处理", "清溪膜净", "污水处理设备", "每天可处理污水5万吨", "每天能处理多少吨污水"),
    ("绿洲农牧", "肉类加工", "绿洲牧场", "冷鲜牛肉", "从屠宰到上架不超过48小时", "从屠宰到上架最长多久"),
    ("朗峰家居", "家具", "朗峰云眠", "智能床垫", "内置128个独立弹簧传感器", "装了多少个传感器"),
    ("恒岳钢铁", "钢铁", "恒岳绿钢", "低碳钢材", "每吨碳排放减少40%", "每吨碳排放降低多少"),
    ("东篱酒业", "白酒", "东篱十五年", "白酒", "窖藏时间为十五年", "窖藏了多少年"),
    ("石榴音乐", "音乐流媒体", "石榴Hi-Fi", "无损音乐服务", "曲库超过8000万首", "曲库有多少首歌"),
]

# what a firm's new product costs, in the unit its trade quotes
PRICES = {
    "澄江机器人": "3299元", "远帆电池": "每千瓦时600元", "星桥半导体": "每颗350元", "鹿鸣乳业": "每箱89元",
    "松涛物流": "每吨公里1.2元", "金穗食品": "每盒19.9元", "银杉生物": "每盒128元", "北辰汽车": "21.98万元起",
    "蓝鲸航运": "每艘约16亿元", "云栖游戏": "月卡30元", "赤霄航天": "每次发射约3000万元", "瀚海光电": "每瓦0.9元",
    "丰泽茶业": "每盒1280元", "明川医疗": "每台3.8万元", "翠屏纺织": "每米45元", "嘉禾种业": "每公斤68元",
    "华岳重工": "每台1280万元", "天枢智能": "每百万字8元", "海棠影业": "平均票价45元", "凌霄无人机": "每架6.8万元",
    "锦程旅游": "会员每年198元", "启明教育": "2999元", "长风风电": "每台约9000万元", "鸿雁快递": "每单18元起",
    "清溪水务": "每套380万元", "绿洲农牧": "每公斤138元", "朗峰家居": "8999元", "恒岳钢铁": "每吨5200元",
    "东篱酒业": "每瓶1599元", "石榴音乐": "每月15元",
}
CITIES = ["杭州", "深圳", "成都", "武汉", "苏州", "南京", "西安", "长沙", "合肥", "青岛", "厦门", "重庆",
          "天津", "广州", "郑州", "昆明", "大连", "宁波", "无锡", "济南", "福州", "南昌", "贵阳", "兰州"]
HOMETOWNS = ["浙江温州", "湖南湘潭", "四川绵阳", "江苏盐城", "福建泉州", "山东潍坊", "河南洛阳", "安徽芜湖",
             "湖北宜昌", "江西赣州", "广西桂林", "云南大理", "黑龙江齐齐哈尔", "吉林延边", "辽宁鞍山",
             "河北保定", "山西大同", "陕西宝鸡", "甘肃天水", "贵州遵义", "广东汕头", "海南三亚",
             "内蒙古包头", "新疆石河子", "宁夏银川", "青海西宁", "重庆万州", "浙江台州", "江苏南通",
             "福建莆田"]
# firms whose new site is a campus, not a factory
SERVICES = {"网络游戏", "电影", "人工智能", "在线旅游", "在线教育", "快递", "音乐流媒体", "冷链物流", "远洋航运"}
SCHOOLS = ["清华大学", "北京大学", "浙江大学", "复旦大学", "上海交通大学", "南京大学", "武汉大学",
           "中山大学", "四川大学", "哈尔滨工业大学", "西安交通大学", "华中科技大学", "同济大学",
           "厦门大学", "山东大学", "香港科技大学", "香港中文大学", "东南大学", "天津大学", "北京航空航天大学"]
INVESTORS = ["红杉资本中国", "高瓴资本", "国家集成电路产业投资基金", "深创投", "启明创投", "中金资本",
             "招银国际", "元禾控股", "君联资本", "IDG资本", "北京市科技创新基金", "上海国际集团",
             "香港投资管理有限公司", "淡马锡", "华兴资本"]
PREV = ["华为", "阿里巴巴", "腾讯", "比亚迪", "中国移动", "宁德时代", "京东", "美的集团", "小米集团",
        "联想集团", "中国银行", "招商局集团", "国家电网", "中信证券", "百度"]
SURNAMES = list("王李张刘陈杨赵黄周吴徐孙胡朱高林何郭马罗梁宋郑谢韩唐冯董萧程曹袁邓许傅沈曾彭吕苏卢蒋蔡贾丁魏薛叶潘杜戴夏钟汪田任姜范方石姚谭廖邹熊金陆郝孔白崔康毛邱秦江史顾侯邵孟龙万段雷钱汤尹黎易常武乔贺赖龚文")
GIVEN = ["晓峰", "雨桐", "志远", "嘉欣", "明哲", "立群", "海燕", "子涵", "思远", "建国", "文静", "国强", "丽华",
         "俊杰", "欣怡", "浩然", "雅琴", "德明", "秀英", "一鸣", "佳琪", "永康", "春生", "若兰", "天宇", "梦瑶",
         "振华", "慧敏", "家豪", "诗雨", "宏图", "静怡", "伟东", "书涵", "绍辉", "亦菲", "卫民", "晨阳", "雪松",
         "乐天", "可馨", "泽宇", "婉清", "铁军", "凤霞", "鹏程", "语嫣", "少华", "清远", "博文", "安琪", "景行",
         "怀瑾", "秋实", "向阳", "朝晖", "兰芳", "锦华", "远航", "默然"]

used_names: set[str] = set()


def person() -> str:
    while True:
        name = rng.choice(SURNAMES) + rng.choice(GIVEN)
        if name not in used_names:
            used_names.add(name)
            return name


def build_firms() -> list[Firm]:
    firms = []
    cities = CITIES[:]
    rng.shuffle(cities)
    towns = HOMETOWNS[:]
    rng.shuffle(towns)
    for i, (name, industry, product, kind, spec, spec_q) in enumerate(FIRMS_RAW):
        # a quarter of the firms sit in the hub cities themselves
        hq = ["北京", "上海"][i % 2] if i % 4 == 0 else cities[i % len(cities)]
        factory = cities[(i + 7) % len(cities)]
        if factory == hq:
            factory = cities[(i + 8) % len(cities)]
        firms.append(Firm(
            name=name, industry=industry, product=product, kind=kind, spec=spec, spec_q=spec_q, hq=hq,
            founder=person(), school=SCHOOLS[i % len(SCHOOLS)], hometown=towns[i % len(towns)],
            founded=2008 + (i * 7) % 15, ceo=person(), ceo_prev=PREV[i % len(PREV)],
            investor=INVESTORS[i % len(INVESTORS)], amount=3 + (i * 5) % 28, revenue=12 + (i * 13) % 180,
            growth=5 + (i * 11) % 60, factory_city=factory, capacity=f"{2 + i % 9}万台" if i % 3 else f"{10 + i}万吨",
            price=PRICES[name]))
    # supply chains: firm i is supplied by firm j (a bridge entity between two items)
    for i in range(0, len(firms), 2):
        firms[i].partner = firms[(i + 5) % len(firms)].name
    return firms


corpus: list[dict] = []
questions: list[dict] = []


def unquoted_titles(text: str) -> str:
    """A film's name carries its own title marks: “《…》” is written 《…》."""
    return text.replace("“《", "《").replace("》”", "》")


def add(title: str, text: str) -> str:
    pid = f"zl{len(corpus) + 1:03d}"
    text = unquoted_titles(text)
    corpus.append({"id": pid, "title": title, "text": text})
    return pid


def ask(question: str, gold: list[str], hops: int, answer: str, anchor: str) -> None:
    questions.append({"id": f"zlq{len(questions):03d}", "question": unquoted_titles(question), "gold_passage_ids": gold,
                      "hops": hops, "answer": answer, "anchor": anchor})


def pick(*options: str) -> str:
    return rng.choice(options)


def firm_items(f: Firm) -> dict[str, str]:
    """The firm's items by kind; every firm gets the launch, its follow-up, founder, funding and CEO;
    the others by turn so that near-duplicate stories differ between firms."""
    ids: dict[str, str] = {}
    venue = pick("北京", "上海", "北京", "上海", f.hq)
    ids["launch"] = add(f"{f.name}发布{f.product}", pick(
        f"{f.name}在{venue}发布新款{f.kind}“{f.product}”，{f.spec}。公司表示，新品将首先在中国市场销售。",
        f"{f.name}昨日在{venue}举行发布会，推出{f.kind}“{f.product}”。据介绍，该产品{f.spec}。",
        f"“{f.product}”正式亮相。这款由{f.name}研发的{f.kind}{f.spec}，发布会在{venue}举行。"))
    ids["launch2"] = add(f"{f.product}开售", pick(
        f"{f.name}的“{f.product}”今日开售，售价{f.price}，首批订单来自北京、上海和香港的客户。",
        f"记者从{f.name}获悉，“{f.product}”定价{f.price}，预订已覆盖中国三十个省份。",
        f"“{f.product}”推出首日，{f.name}公布的价格为{f.price}，上海已有客户签约。"))
    ids["founder"] = add(f"{f.founder}与{f.name}", pick(
        f"{f.name}创始人{f.founder}出生于{f.hometown}，毕业于{f.school}，{f.founded}年在{f.hq}创办公司。",
        f"{f.founded}年，{f.school}毕业生{f.founder}在{f.hq}创立{f.name}。他的老家在{f.hometown}。",
        f"出身{f.hometown}的{f.founder}，大学就读于{f.school}，{f.founded}年在{f.hq}创办{f.name}，专注{f.industry}。"))
    ids["funding"] = add(f"{f.name}完成新一轮融资", pick(
        f"{f.name}宣布完成{f.amount}亿元人民币融资，由{f.investor}领投，资金将用于研发和扩产。",
        f"{f.industry}企业{f.name}获得{f.amount}亿元人民币投资，领投方为{f.investor}。",
        f"{f.investor}领投{f.name}新一轮融资，金额为{f.amount}亿元人民币，这是公司成立以来最大的一笔融资。"))
    ids["ceo"] = add(f"{f.name}任命新总裁", pick(
        f"{f.name}董事会任命{f.ceo}为首席执行官。{f.ceo}此前在{f.ceo_prev}工作多年。",
        f"{f.ceo}出任{f.name}首席执行官，他曾任职于{f.ceo_prev}，将常驻{f.hq}。",
        f"{f.name}宣布人事变动：来自{f.ceo_prev}的{f.ceo}接任首席执行官，创始人{f.founder}改任董事长。"))
    turn = FIRMS_RAW.index(next(r for r in FIRMS_RAW if r[0] == f.name))
    if turn % 2 == 0:
        ids["results"] = add(f"{f.name}公布年度业绩", pick(
            f"{f.name}公布去年营收{f.revenue}亿元人民币，同比增长{f.growth}%，海外收入占比继续提升。",
            f"财报显示，{f.name}全年营业收入{f.revenue}亿元人民币，比上年增长{f.growth}%，中国市场贡献了大部分收入。"))
    if turn % 3 != 1 and f.industry in SERVICES:
        ids["factory"] = add(f"{f.name}{f.factory_city}园区启用", pick(
            f"{f.name}位于{f.factory_city}的新园区正式启用，可容纳{2000 + 100 * turn}名员工，主要承担研发和客服。",
            f"{f.factory_city}市政府消息，{f.name}的区域总部园区已经落成，首批入驻员工约{2000 + 100 * turn}人。"))
    elif turn % 3 != 1:
        ids["factory"] = add(f"{f.name}{f.factory_city}工厂投产", pick(
            f"{f.name}位于{f.factory_city}的新工厂正式投产，年产能{f.capacity}。",
            f"{f.factory_city}市政府消息，{f.name}新工厂已经投产，设计年产能为{f.capacity}，其中三成产品供应中国以外的市场。"))
    if turn % 3 == 0:
        ids["ipo"] = add(f"{f.name}拟赴港上市", pick(
            f"{f.name}向香港交易所递交上市申请，拟募资约{f.amount * 2}亿港元。",
            f"知情人士称，{f.name}计划明年在香港上市，保荐人为中金公司。"))
    if turn % 2 == 1:
        fair = pick("香港", "上海", "北京")
        ids["expo"] = add(f"{f.name}亮相{fair}展会", pick(
            f"在{fair}举行的中国国际{f.industry}博览会上，{f.name}展出了“{f.product}”，并宣布产品将进入东南亚市场。",
            f"{f.name}参加{fair}的{f.industry}展会，展台以“{f.product}”为主角，吸引了不少海外采购商。"))
    if turn % 5 == 2:
        ids["policy"] = add(f"新政利好{f.industry}企业", pick(
            f"国务院近日出台支持{f.industry}发展的政策，{f.name}股价当天上涨9%，创上市以来新高。",
            f"受国务院新政策提振，{f.industry}板块走强，{f.name}当日成交额超过20亿元人民币。"))
    if f.partner:
        ids["supply"] = add(f"{f.partner}与{f.name}签约", pick(
            f"{f.partner}与{f.name}签署五年战略合作协议，双方将在“{f.product}”的推广和渠道上合作。",
            f"{f.name}宣布与{f.partner}结成战略伙伴，{f.partner}将参与“{f.product}”在海外的推广，协议期限五年。"))
    return ids


HAND_WRITTEN = [
    # (title, text): the hub-heavy city, policy and finance items, and sports and culture
    ("国务院常务会议部署冷链物流", "国务院总理主持召开国务院常务会议，部署加快县域冷链物流建设，中央财政将安排专项资金支持产地仓建设。"),
    ("国务院常务会议讨论养老服务", "国务院常务会议审议通过关于发展社区养老服务的意见，提出到2027年每个街道至少建成一家综合养老服务中心。"),
    ("国务院常务会议研究就业", "国务院常务会议研究稳就业措施，决定延续阶段性降低失业保险费率政策，并扩大高校毕业生见习岗位。"),
    ("国务院印发数据要素行动计划", "国务院印发数据要素三年行动计划，提出在北京、上海、深圳等地建设数据交易场所。"),
    ("国务院批复海南自贸港新政", "国务院批复同意海南自由贸易港扩大免税商品范围，新增宠物用品和乐器两大类。"),
    ("人民银行下调存款准备金率", "中国人民银行宣布下调金融机构存款准备金率0.5个百分点，释放长期资金约1万亿元人民币。"),
    ("人民币兑美元中间价上调", "人民币兑美元汇率中间价上调112个基点，报7.0825，为近三个月最大单日升幅。"),
    ("人民币跨境支付系统扩容", "人民币跨境支付系统新增38家直接参与者，其中香港和新加坡的银行占一半以上。"),
    ("人民币国际化报告发布", "中国人民银行发布人民币国际化报告，去年人民币在全球支付中的份额升至4.7%。"),
    ("数字人民币试点扩大", "数字人民币试点扩大到17个省份，上海地铁全线已支持数字人民币扫码乘车。"),
    ("北京地铁17号线全线贯通", "北京地铁17号线全线贯通，从未来科学城到亦庄站前区，全程只需55分钟。"),
    ("北京地铁3号线一期开通", "北京地铁3号线一期开通运营，东坝地区居民到东四十条的通勤时间缩短一半。"),
    ("北京地铁12号线试运行", "北京地铁12号线开始空载试运行，线路横穿海淀、朝阳两区，设站20座。"),
    ("北京入冬首场降雪", "北京迎来入冬首场降雪，延庆山区积雪达到8厘米，首都机场部分航班延误。"),
    ("北京马拉松鸣枪开跑", "北京马拉松在天安门广场鸣枪开跑，三万名选手参赛，男子组冠军成绩为2小时9分。"),
    ("北京国际电影节闭幕", "第十五届北京国际电影节闭幕，天坛奖最佳影片授予来自伊朗的《沙漠之光》。"),
    ("上海进博会签约额创新高", "第七届中国国际进口博览会在上海闭幕，按年计意向成交额达到800亿美元。"),
    ("上海浦东新机场规划公布", "上海公布浦东机场四期扩建规划，新建一座航站楼，年旅客吞吐能力增加5000万人次。"),
    ("上海黄浦江游船夜航升级", "上海黄浦江游船推出夜航新线路，从十六铺码头出发，途经杨浦大桥后折返。"),
    ("上海迪士尼新园区开放", "上海迪士尼度假区的疯狂动物城主题园区开放，首日接待游客约四万人。"),
    ("上海高温红色预警", "上海中心气象台发布高温红色预警，徐家汇站最高气温达到40.6度，创有记录以来新高。"),
    ("香港恒生指数大涨", "香港恒生指数收涨4.2%，科技股领涨，全日成交额超过3000亿港元。"),
    ("香港启德体育园启用", "香港启德体育园正式启用，主场馆可容纳五万名观众，首场活动是一场七人榄球赛。"),
    ("香港机场第三跑道运作", "香港国际机场三跑道系统全面运作，每小时航班起降量可提升到102架次。"),
    ("香港特区政府发布施政报告", "香港特区行政长官发表施政报告，宣布在北部都会区兴建一所新的大学。"),
    ("香港海洋公园大熊猫产子", "香港海洋公园的大熊猫盈盈诞下一对双胞胎，这是香港首次有大熊猫自然繁育成功。"),
    ("深圳前海合作区扩区", "深圳前海深港现代服务业合作区扩区后，吸引超过3000家香港企业落户。"),
    ("广州塔灯光秀", "广州塔为庆祝国庆举办灯光秀，珠江两岸吸引约二十万市民观看。"),
    ("杭州亚运场馆向公众开放", "杭州亚运会场馆向公众开放，奥体中心游泳馆每天提供2000个免费游泳名额。"),
    ("成都大熊猫基地扩建", "成都大熊猫繁育研究基地扩建工程完工，新增面积约100公顷，参观预约需提前一天。"),
    ("西安城墙灯会", "西安城墙新春灯会亮灯，主灯组以唐代长安城为原型，灯会持续到元宵节。"),
    ("武汉长江大桥检修", "武汉长江大桥开始为期两个月的检修，期间夜间禁止货车通行。"),
    ("中国女足亚洲杯夺冠", "中国女足在亚洲杯决赛中3比2逆转韩国队，时隔16年再夺冠军，主教练为宋凯文。"),
    ("宋凯文执教生涯", "女足主教练宋凯文生于辽宁大连，曾执教上海女足八年，带队获得三次全国联赛冠军。"),
    ("中国乒乓球队公布奥运名单", "中国乒乓球队公布巴黎奥运会参赛名单，混双组合由王楚然和孙一鸣搭档。"),
    ("孙一鸣打破纪录", "乒乓球选手孙一鸣在世界杯上连续赢下21局，打破保持了十年的纪录。"),
    ("中国男篮新帅上任", "中国篮协宣布，前广东队主帅郭士强出任中国男篮主教练，合同四年。"),
    ("故宫博物院新展", "故宫博物院推出宋代书画特展，展出《千里江山图》等九十余件文物，需提前预约。"),
    ("国家大剧院新版歌剧", "国家大剧院新版歌剧《红楼梦》首演，导演为旅居香港的艺术家冯晚舟。"),
    ("冯晚舟获终身成就奖", "歌剧导演冯晚舟在上海获颁终身成就奖。她早年毕业于中央戏剧学院，曾在维也纳进修。"),
    ("茅盾文学奖揭晓", "第十二届茅盾文学奖揭晓，长篇小说《河西走廊》等五部作品获奖，作者叶知秋来自甘肃。"),
    ("叶知秋新作出版", "作家叶知秋的新小说《敦煌来信》出版，讲述一个邮差在1950年代的故事，由北岳文艺出版社出版。"),
    ("三峡大坝迎来汛期", "三峡水库迎来今年最大洪峰，入库流量达到每秒5.5万立方米，水库开始拦洪。"),
    ("青藏铁路复兴号开行", "复兴号列车首次开行至拉萨，西宁到拉萨的旅行时间缩短约三个小时。"),
    ("中国空间站完成出舱任务", "中国空间站航天员完成第三次出舱活动，安装了一台新的空间辐射探测设备。"),
    ("嫦娥七号发射时间确定", "国家航天局宣布嫦娥七号计划于2026年发射，任务是在月球南极寻找水冰。"),
    ("全国粮食产量再创新高", "国家统计局公布，全国粮食总产量达到1.41万亿斤，连续九年稳定在1.3万亿斤以上。"),
    ("中国出口集装箱运价回落", "中国出口集装箱运价指数连续五周回落，上海至欧洲航线运价下跌12%。"),
    ("香港与深圳跨境通勤", "港深西部铁路规划公布，建成后从香港洪水桥到深圳前海只需十五分钟。"),
    ("北京大兴机场客流", "北京大兴国际机场国庆假期日均客流达到18万人次，国际航线恢复到疫情前九成。"),
]


def hand_questions(ids: list[str]) -> None:
    by_title = {c["title"]: c["id"] for c in corpus if c["id"] in ids}
    one = [
        ("国务院哪次会议决定给产地仓建设拨专款？", "国务院常务会议部署冷链物流", "产地仓", "冷链"),
        ("按照新的养老意见，哪一年前每个街道要有综合养老中心？", "国务院常务会议讨论养老服务", "2027", "养老"),
        ("为了稳就业，失业保险费率政策怎么调整？", "国务院常务会议研究就业", "失业保险", "就业"),
        ("海南自贸港的免税清单新加了哪两类商品？", "国务院批复海南自贸港新政", "乐器", "海南"),
        ("央行这次降准能放出多少长期资金？", "人民银行下调存款准备金率", "1万亿", "准备金"),
        ("人民币中间价单日升了多少个基点？", "人民币兑美元中间价上调", "112", "中间价"),
        ("跨境支付系统新增的直接参与者有多少家？", "人民币跨境支付系统扩容", "38", "跨境支付"),
        ("在哪座城市可以用数字人民币扫码坐地铁？", "数字人民币试点扩大", "上海地铁", "数字人民币"),
        ("从未来科学城坐地铁到亦庄站前区要多长时间？", "北京地铁17号线全线贯通", "55分钟", "未来科学城"),
        ("东坝居民去东四十条上班变快了，是哪条地铁线开通了？", "北京地铁3号线一期开通", "3号线", "东坝"),
        ("北京今冬第一场雪，延庆积雪多深？", "北京入冬首场降雪", "8厘米", "延庆"),
        ("北京马拉松男子冠军跑了多长时间？", "北京马拉松鸣枪开跑", "2小时9分", "马拉松"),
        ("今年北京电影节的天坛奖最佳影片是哪部？", "北京国际电影节闭幕", "沙漠之光", "天坛奖"),
        ("浦东机场扩建后每年能多接待多少旅客？", "上海浦东新机场规划公布", "5000万", "浦东机场"),
        ("上海徐家汇创纪录的高温是多少度？", "上海高温红色预警", "40.6", "徐家汇"),
        ("启德体育园主场馆能坐多少人？", "香港启德体育园启用", "五万", "启德"),
        ("三跑道系统让香港机场每小时最多起降多少架次？", "香港机场第三跑道运作", "102", "三跑道"),
        ("施政报告说要在北部都会区建什么？", "香港特区政府发布施政报告", "大学", "北部都会区"),
        ("香港第一次自然繁育大熊猫成功的是哪只熊猫？", "香港海洋公园大熊猫产子", "盈盈", "大熊猫"),
        ("有多少香港企业落户前海合作区？", "深圳前海合作区扩区", "3000", "前海"),
        ("杭州奥体中心游泳馆每天有多少个免费名额？", "杭州亚运场馆向公众开放", "2000", "游泳"),
        ("西安城墙灯会的主灯是以什么为原型的？", "西安城墙灯会", "长安城", "灯会"),
        ("武汉长江大桥检修期间什么车晚上不能走？", "武汉长江大桥检修", "货车", "长江大桥"),
        ("女足亚洲杯决赛中国队赢了谁？", "中国女足亚洲杯夺冠", "韩国", "亚洲杯"),
        ("巴黎奥运会乒乓球混双由谁和谁搭档？", "中国乒乓球队公布奥运名单", "王楚然", "混双"),
        ("故宫的宋代书画展展出了多少件文物？", "故宫博物院新展", "九十余件", "故宫"),
        ("《敦煌来信》的主人公是做什么工作的？", "叶知秋新作出版", "邮差", "敦煌来信"),
        ("三峡水库今年最大洪峰的入库流量是多少？", "三峡大坝迎来汛期", "5.5万", "三峡"),
        ("嫦娥七号要去月球哪里找水冰？", "嫦娥七号发射时间确定", "南极", "嫦娥七号"),
        ("从上海到欧洲的集装箱运价跌了多少？", "中国出口集装箱运价回落", "12%", "运价"),
        ("大兴机场国庆期间每天有多少旅客？", "北京大兴机场客流", "18万", "大兴"),
    ]
    for question, title, answer, anchor in one:
        ask(question, [by_title[title]], 1, answer, anchor)
    two = [
        ("带领中国女足夺得亚洲杯的教练在哪座城市出生？", ["中国女足亚洲杯夺冠", "宋凯文执教生涯"], "大连", "女足"),
        ("和王楚然搭档混双的选手打破了什么纪录？", ["中国乒乓球队公布奥运名单", "孙一鸣打破纪录"], "21局", "王楚然"),
        ("执导国家大剧院新版《红楼梦》的导演毕业于哪所学校？", ["国家大剧院新版歌剧", "冯晚舟获终身成就奖"], "中央戏剧学院", "红楼梦"),
        ("《河西走廊》作者的新小说由哪家出版社出版？", ["茅盾文学奖揭晓", "叶知秋新作出版"], "北岳文艺出版社", "河西走廊"),
    ]
    for question, titles, answer, anchor in two:
        ask(question, [by_title[t] for t in titles], 2, answer, anchor)
    # a topic with many gold items: every Beijing metro item
    metro = [by_title[t] for t in ("北京地铁17号线全线贯通", "北京地铁3号线一期开通", "北京地铁12号线试运行")]
    ask("北京最近有哪些地铁线路开通或试运行？", metro, 1, "地铁", "北京地铁")
    ask("香港最近有哪些大型设施投入使用？", [by_title["香港启德体育园启用"], by_title["香港机场第三跑道运作"]],
        1, "香港", "启用")
    ask("人民币在国际上的使用有什么新进展？", [by_title["人民币跨境支付系统扩容"], by_title["人民币国际化报告发布"]],
        1, "人民币", "跨境支付")
    ask("上海有哪些新的旅游休闲项目？", [by_title["上海黄浦江游船夜航升级"], by_title["上海迪士尼新园区开放"]],
        1, "上海", "游船")
    ask("国务院常务会议最近讨论了哪些议题？",
        [by_title[t] for t in ("国务院常务会议部署冷链物流", "国务院常务会议讨论养老服务", "国务院常务会议研究就业")],
        1, "国务院常务会议", "国务院常务会议")


def firm_questions(firms: list[Firm], items: dict[str, dict[str, str]]) -> None:
    by_name = {f.name: f for f in firms}
    for i, f in enumerate(firms):
        ids = items[f.name]
        # single hop, one per firm at least, each in other words than its item
        variants = [
            (f"{f.name}新推出的{f.kind}{f.spec_q}？", ["launch"], f.spec, f.product),
            (f"“{f.product}”卖多少钱？", ["launch2"], f.price, f.product),
            (f"{f.name}的创办人是在哪里长大的？", ["founder"], f.hometown, f.name),
            (f"谁牵头了{f.name}这轮{f.amount}亿元的投资？", ["funding"], f.investor, f.name),
            (f"{f.name}新任首席执行官之前在哪家公司？", ["ceo"], f.ceo_prev, f.name),
        ]
        if "results" in ids:
            variants.append((f"{f.name}去年的收入增长了多少？", ["results"], f"{f.growth}%", f.name))
        if "factory" in ids:
            variants.append((f"{f.name}的新{'园区' if f.industry in SERVICES else '厂'}建在哪座城市？", ["factory"], f.factory_city, f.name))
        if "ipo" in ids:
            variants.append((f"{f.name}打算在哪里挂牌？", ["ipo"], "香港", f.name))
        for question, kinds, answer, anchor in [variants[(i * 3) % len(variants)]]:
            ask(question, [ids[k] for k in kinds], 1, answer, anchor)
    # two hops: the product's maker's founder; the supplier's founder or funding; the maker's CEO
    two_hop = []
    for i, f in enumerate(firms):
        ids = items[f.name]
        if i % 3 == 0:
            two_hop.append((f"“{f.product}”的生产商，其创始人毕业于哪所大学？", [ids["launch"], ids["founder"]],
                            f.school, f.product))
        if f.partner and i % 4 == 0:
            p = by_name[f.partner]
            two_hop.append((f"和“{f.product}”的生产商结成战略伙伴的企业是在哪座城市创办的？",
                            [ids["supply"], items[p.name]["founder"]], p.hq, f.product))
        elif f.partner and i % 4 == 2:
            p = by_name[f.partner]
            two_hop.append((f"与“{f.product}”的厂商签了五年合作协议的公司，现任首席执行官是谁？",
                            [ids["supply"], items[p.name]["ceo"]], p.ceo, f.product))
    for question, gold, answer, anchor in two_hop:
        ask(question, gold, 2, answer, anchor)
    # a topic with several gold items: everything about one firm's new product
    for f in firms[:6]:
        ids = items[f.name]
        texts = {c["id"]: c["title"] + c["text"] for c in corpus}
        gold = [pid for pid in ids.values() if f.product in texts[pid]]
        ask(f"关于“{f.product}”有哪些报道？", gold, 1, f.product, f.product)


def many_gold_questions(firms: list[Firm], items: dict[str, dict[str, str]]) -> None:
    """Questions whose gold is five or more items (precision@5 counts them): everything about one
    firm, and one kind of story across the firms."""
    texts = {c["id"]: c["title"] + c["text"] for c in corpus}
    for i, f in enumerate(firms[1::4]):
        gold = [pid for pid, body in texts.items() if f.name in body]
        ask((f"{f.name}最近有哪些动态？", f"有关{f.name}的新闻有哪些？")[i % 2], gold, 1, f.name, f.name)
    funding = [items[f.name]["funding"] for f in firms]
    ask("哪些企业拿到了新的融资，分别由谁领投？", funding, 1, "领投", "领投")
    listing = [pid for f in firms for kind, pid in items[f.name].items() if kind == "ipo"]
    ask("有哪些公司准备去香港上市？", listing, 1, "拟赴港上市", "拟赴港上市")


def check() -> None:
    text = {c["id"]: c["title"] + "\n" + c["text"] for c in corpus}
    problems = []
    for q in questions:
        gold = q["gold_passage_ids"]
        if q["answer"] not in text[gold[-1]] and not any(q["answer"] in text[g] for g in gold):
            problems.append(f"{q['id']}: answer {q['answer']!r} not in its gold items")
        if q["anchor"] not in text[gold[0]]:
            problems.append(f"{q['id']}: anchor {q['anchor']!r} not in its first gold item")
        for pid, body in text.items():
            if pid not in gold and q["answer"] in body and q["anchor"] in body:
                problems.append(f"{q['id']}: {pid} outside the gold holds {q['answer']!r} and {q['anchor']!r}")
    if problems:
        raise SystemExit("\n".join(problems))


def main() -> None:
    firms = build_firms()
    items = {f.name: firm_items(f) for f in firms}
    hand = [add(title, text) for title, text in HAND_WRITTEN]
    # shuffle the corpus order so that a firm's items are not neighbours in id order
    firm_questions(firms, items)
    hand_questions(hand)
    many_gold_questions(firms, items)
    check()
    order = corpus[:]
    rng.shuffle(order)
    with (HERE / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for c in order:
            out.write(json.dumps(c, ensure_ascii=False) + "\n")
    with (HERE / "questions.jsonl").open("w", encoding="utf-8") as out:
        for q in questions:
            out.write(json.dumps(q, ensure_ascii=False) + "\n")
    multi = sum(q["hops"] >= 2 for q in questions)
    print(f"{len(corpus)} items, {len(questions)} questions ({multi} multi-hop)")


if __name__ == "__main__":
    main()
